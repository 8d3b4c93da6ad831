//! A route's routing keys: the other names clients may send for it
//! (`aliases`), how it orders its targets (`strategy`) and each target's
//! share of a weighted route (`weight`). Every name a client may send picks
//! one route, so a name or alias used twice is an error.

use std::sync::Arc;

use toml::Spanned;

use super::raw::RawRoute;
use super::validate::Checker;
use super::{ConfigError, Route, Strategy};

impl Checker<'_> {
    /// The route's aliases: none empty, none repeated, none its own name.
    pub(super) fn aliases(&self, raw: &RawRoute, model: &str, key: &str) -> Result<Vec<String>, ConfigError> {
        let Some(names) = &raw.aliases else { return Ok(Vec::new()) };
        let mut aliases: Vec<String> = Vec::new();
        for alias in names.get_ref() {
            let alias = alias.trim();
            let wrong = if alias.is_empty() {
                Some("an alias must not be empty".to_owned())
            } else if alias == model {
                Some(format!("{alias:?} is already the route's own name"))
            } else if aliases.iter().any(|a| a == alias) {
                Some(format!("{alias:?} is listed twice"))
            } else {
                None
            };
            if let Some(message) = wrong {
                return Err(self.error(names, key.to_owned(), message));
            }
            aliases.push(alias.to_owned());
        }
        Ok(aliases)
    }

    /// `strategy`: `"ordered"` unless the route says otherwise.
    pub(super) fn strategy(&self, raw: &RawRoute, key: &str) -> Result<Strategy, ConfigError> {
        let Some(value) = &raw.strategy else { return Ok(Strategy::Ordered) };
        match value.get_ref().as_str() {
            "ordered" => Ok(Strategy::Ordered),
            "fastest" => Ok(Strategy::Fastest),
            "weighted" => Ok(Strategy::Weighted),
            other => Err(self.error(
                value,
                key.to_owned(),
                format!("{other:?} is not a strategy: use \"ordered\", \"fastest\" or \"weighted\""),
            )),
        }
    }

    /// A target's `weight`: a positive whole number, 1 unless set.
    pub(super) fn weight(&self, value: Option<&Spanned<u32>>, key: &str) -> Result<u32, ConfigError> {
        match value {
            Some(weight) if *weight.get_ref() == 0 => {
                Err(self.error(weight, key.to_owned(), "must be at least 1 (remove the target to send it nothing)"))
            }
            Some(weight) => Ok(*weight.get_ref()),
            None => Ok(1),
        }
    }

    /// Route `i`'s name or one of its aliases, if either already names one
    /// of the routes before it: a client sending it could not say which.
    pub(super) fn name_clash(
        &self,
        raw: &RawRoute,
        i: usize,
        route: &Route,
        before: &[Arc<Route>],
    ) -> Option<ConfigError> {
        if let Some(other) = before.iter().find(|other| other.answers_to(&route.model)) {
            let message = if other.model == route.model {
                format!("duplicate route {:?}", route.model)
            } else {
                format!("{:?} is already an alias of route {:?}", route.model, other.model)
            };
            return Some(self.error(&raw.model, format!("routes[{i}].model"), message));
        }
        let aliases = raw.aliases.as_ref()?;
        route.aliases.iter().find_map(|alias| {
            let other = before.iter().find(|other| other.answers_to(alias))?;
            let message = format!("alias {alias:?} already names route {:?}", other.model);
            Some(self.error(aliases, format!("routes[{i}].aliases"), message))
        })
    }
}
