-- Responses kept for `previous_response_id`: each turn's own input items and the response it got.
CREATE TABLE responses (
    id TEXT PRIMARY KEY,                -- the response id baton gave (resp_…)
    owner TEXT NOT NULL,                -- the client key's name; '' on a gateway without keys
    created_ms BIGINT NOT NULL,         -- Unix milliseconds; retention_days counts from here
    previous_id TEXT,                   -- the response this turn was chained to
    maker TEXT NOT NULL,                -- the provider that answered: its encrypted reasoning goes back only to it
    input TEXT NOT NULL,                -- JSON array: the turn's input items as the client sent them
    response TEXT NOT NULL              -- JSON: the response object as the client got it
);
CREATE INDEX responses_created ON responses (created_ms);
