-- The request log (its cost column is the spend ledger) and the client keys kept in the store.
CREATE TABLE requests (
    seq INTEGER PRIMARY KEY,            -- insertion order: the tie-break of the log's cursor
    id TEXT NOT NULL,                   -- the request id (x-request-id); a client may reuse one
    time_ms BIGINT NOT NULL,            -- arrival, Unix milliseconds
    key TEXT,                           -- the client key's name
    dialect TEXT NOT NULL,
    route TEXT,
    model_asked TEXT,
    provider TEXT,                      -- who answered
    model TEXT,
    attempts BIGINT NOT NULL,           -- requests sent upstream, the winner's included
    attempt_log TEXT NOT NULL,          -- JSON: [{provider, model, class, sent}]
    ttft_ms BIGINT,
    duration_ms BIGINT NOT NULL,
    input_tokens BIGINT,
    output_tokens BIGINT,
    cached_tokens BIGINT,
    reasoning_tokens BIGINT,
    cost_usd DOUBLE PRECISION,
    outcome TEXT NOT NULL,
    status BIGINT NOT NULL,
    trace_id TEXT,
    request_body TEXT,                  -- only with log_bodies = true, capped and redacted
    answer_text TEXT
);
CREATE INDEX requests_time ON requests (time_ms, seq);
CREATE INDEX requests_key ON requests (key, time_ms);
CREATE INDEX requests_route ON requests (route, time_ms);
CREATE INDEX requests_provider ON requests (provider, time_ms);
CREATE INDEX requests_outcome ON requests (outcome, time_ms);

CREATE TABLE keys (
    name TEXT PRIMARY KEY,
    secret_sha256 TEXT NOT NULL,        -- hex; the secret itself is shown once and never kept
    routes TEXT,                        -- JSON array; NULL: every route
    rpm BIGINT,
    tpm BIGINT,
    budget TEXT,                        -- JSON: {usd_per_minute, usd_per_hour, usd_per_day}
    created_ms BIGINT NOT NULL,
    revoked_ms BIGINT
);
