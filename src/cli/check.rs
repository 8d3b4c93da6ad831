//! `baton check`: a config validated and described, with the store it names.

use std::time::Duration;

use baton::config;

use super::AnyError;

/// How long `baton check` waits for the store to answer.
const CHECK_STORE_LIMIT: Duration = Duration::from_secs(5);

#[expect(clippy::print_stdout, reason = "check prints its report")]
pub(crate) async fn run(path: &std::path::Path) -> Result<(), AnyError> {
    let (config, warnings) = config::load_with_warnings(path)?;
    for warning in &warnings {
        println!("warning: {warning}");
    }
    println!("{}: ok, listening on {}", path.display(), config.listen);
    if let Some(telemetry) = &config.telemetry {
        println!("traces: to {} as service {:?}", telemetry.traces_endpoint, telemetry.service_name);
    }
    for webhook in &config.alerts {
        let signed = if webhook.secret.is_some() { ", signed" } else { "" };
        println!("alerts: to {} ({} events{signed})", webhook.host, webhook.events.len());
    }
    for drill in &config.drills {
        println!("drill: route {:?} every {} s, failing {:?}", drill.route, drill.every.as_secs(), drill.fail_spec);
    }
    println!("{}", tokio::time::timeout(CHECK_STORE_LIMIT, store_report(&config.store)).await.unwrap_or_else(|_| {
        format!("store: {}: unreachable (no answer within {CHECK_STORE_LIMIT:?}); baton serves anyway and keeps no rows until it answers", config.store.backend_name())
    }));
    for route in &config.routes {
        let aliases: String = route.aliases.iter().map(|alias| format!(", also {alias:?}")).collect();
        let idle = route.idle_timeout.as_millis();
        println!("route {:?} (idle {idle} ms) strategy {}{aliases}", route.model, route.strategy.as_str());
        for (i, target) in route.targets.iter().enumerate() {
            let provider = &target.provider;
            let weight = match route.strategy {
                config::Strategy::Weighted => format!(", weight {}", target.weight),
                _ => String::new(),
            };
            let window = target.context_window.map(|w| format!(", context window {w}")).unwrap_or_default();
            let price = match target.price {
                Some(price) => format!(", ${} in / ${} out per Mtok", price.input_per_mtok, price.output_per_mtok),
                None => ", unpriced (costs nothing in spend, budgets and charts)".to_owned(),
            };
            println!(
                "  {}. {} ({}, {}) model {}, first token {} ms, {} retries{weight}{window}{price}",
                i + 1,
                provider.name,
                provider.kind,
                provider.account.base_url,
                target.model,
                target.first_token_timeout.as_millis(),
                target.retries
            );
        }
    }
    for provider in &config.providers {
        if let Some(egress) = provider.egress.describe() {
            println!("provider {:?}: {egress}", provider.name);
        }
        if let Some(credential) = &provider.account.credential {
            println!("provider {:?}: credentials: {}", provider.name, credential.source());
        }
    }
    Ok(())
}

/// One line on the store: where it is, whether it answers, and whether
/// its schema is this build's. Nothing is created or migrated.
async fn store_report(store: &config::StoreConfig) -> String {
    use baton::store::Db;
    let place = match &store.backend {
        config::StoreBackend::None => return "store: none (backend = \"none\"): no request log is kept".to_owned(),
        config::StoreBackend::Sqlite { path } if !path.exists() => {
            return format!("store: sqlite {}: not created yet; baton serve creates it", path.display());
        }
        config::StoreBackend::Sqlite { path } => format!("sqlite {}", path.display()),
        config::StoreBackend::Postgres { .. } => "postgres".to_owned(),
    };
    let schema = match Db::connect_only(&store.backend).await {
        Ok(db) => {
            let schema = db.schema().await;
            db.close().await;
            schema
        }
        Err(err) => Err(err),
    };
    match schema {
        Ok(version) if version.is_current() => {
            format!("store: {place}: reachable, schema current (version {})", version.applied)
        }
        Ok(version) => format!(
            "store: {place}: reachable, schema at version {} of {}: baton serve migrates it",
            version.applied, version.embedded
        ),
        Err(err) => format!("store: {place}: unreachable ({err}); baton serve keeps no rows until it answers"),
    }
}
