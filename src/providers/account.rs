//! What a provider's kind makes of its settings at load: the address its
//! requests go to, the options they need (Azure's `api_version`, a cloud's
//! `region` and `project`), and the credential that proves who sends them
//! when a bare key header does not (a SigV4 signature, a fetched token).
//! The config reads the settings; only the kind knows what they mean.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;

use super::{ProviderError, ProviderKind};
use crate::egress::Egress;
use crate::secret::Secret;

/// One `[[providers]]` entry's settings as written, for its kind to read.
pub struct Settings<'a> {
    /// The kind the entry names.
    pub kind: ProviderKind,
    /// `base_url`, expanded.
    pub base_url: Option<&'a str>,
    /// `api_key`.
    pub api_key: Option<&'a Secret>,
    /// `region`: a cloud's region.
    pub region: Option<&'a str>,
    /// `project`: a Google Cloud project.
    pub project: Option<&'a str>,
    /// `api_version`: Azure's `api-version`.
    pub api_version: Option<&'a str>,
    /// `credentials_file`, relative paths already joined to the config's folder.
    pub credentials_file: Option<&'a Path>,
    /// `credentials`: where credentials come from when no file is named (`"metadata"`).
    pub credentials: Option<&'a str>,
    /// `aws_access_key_id`.
    pub aws_access_key_id: Option<&'a Secret>,
    /// `aws_secret_access_key`.
    pub aws_secret_access_key: Option<&'a Secret>,
    /// `aws_session_token`.
    pub aws_session_token: Option<&'a Secret>,
    /// The environment, read as the config's `${VAR}` are.
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// Whether missing credentials may be left missing: for commands that
    /// touch only the store (`baton keys`).
    pub secrets_optional: bool,
}

impl<'a> Settings<'a> {
    /// An entry of `kind` with nothing set but what `env` holds: what a
    /// kind's tests and the benchmarks amend.
    pub fn bare(kind: ProviderKind, env: &'a dyn Fn(&str) -> Option<String>) -> Self {
        Settings {
            kind,
            base_url: None,
            api_key: None,
            region: None,
            project: None,
            api_version: None,
            credentials_file: None,
            credentials: None,
            aws_access_key_id: None,
            aws_secret_access_key: None,
            aws_session_token: None,
            env,
            secrets_optional: false,
        }
    }
}

/// Why a kind cannot take its settings: the key at fault and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The key of the `[[providers]]` entry (`base_url`, `region`).
    pub key: &'static str,
    /// What is wrong with it, never a secret's value.
    pub message: String,
}

impl Refusal {
    /// `key` is wrong because `message`.
    pub fn new(key: &'static str, message: impl Into<String>) -> Self {
        Refusal { key, message: message.into() }
    }
}

impl Settings<'_> {
    /// The settings of a kind that takes a `base_url` and an `api_key`
    /// and nothing else: `base_url` is required and every other key refused.
    pub fn plain(&self) -> Result<Account, Refusal> {
        self.refuse_all_but(&[])?;
        let base_url = self.base_url.ok_or_else(|| Refusal::new("base_url", "is required"))?;
        Ok(Account::new(base_url.to_owned()))
    }

    /// Refuses every setting beyond `base_url` and `api_key` that is set,
    /// unless `allowed` names it: a key that means nothing to a kind is a
    /// mistake to point out, not one to ignore.
    pub fn refuse_all_but(&self, allowed: &[&str]) -> Result<(), Refusal> {
        let set = [
            ("region", self.region.is_some()),
            ("project", self.project.is_some()),
            ("api_version", self.api_version.is_some()),
            ("credentials_file", self.credentials_file.is_some()),
            ("credentials", self.credentials.is_some()),
            ("aws_access_key_id", self.aws_access_key_id.is_some()),
            ("aws_secret_access_key", self.aws_secret_access_key.is_some()),
            ("aws_session_token", self.aws_session_token.is_some()),
        ];
        match set.into_iter().find(|(key, set)| *set && !allowed.contains(key)) {
            Some((key, _)) => {
                let article = if self.kind.name().starts_with(['a', 'e', 'i', 'o', 'u']) { "an" } else { "a" };
                Err(Refusal::new(key, format!("is not a setting of {article} {} provider", self.kind)))
            }
            None => Ok(()),
        }
    }
}

/// What a provider's kind made of its settings.
#[derive(Clone)]
pub struct Account {
    /// Where its requests go: the `base_url` as written, or the kind's
    /// address for its region.
    pub base_url: String,
    /// Options its requests need, by name.
    options: Vec<(&'static str, String)>,
    /// The credential beyond a key header, if the kind has one.
    pub credential: Option<Arc<dyn Credential>>,
}

impl Account {
    /// An account at `base_url` with no options and no credential of its own.
    pub fn new(base_url: String) -> Self {
        Account { base_url, options: Vec::new(), credential: None }
    }

    /// The account with option `name` set to `value`.
    pub fn with(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.options.push((name, value.into()));
        self
    }

    /// The account with `credential` proving its requests.
    pub fn with_credential(mut self, credential: Arc<dyn Credential>) -> Self {
        self.credential = Some(credential);
        self
    }

    /// Option `name`, if set.
    pub fn option(&self, name: &str) -> Option<&str> {
        self.options.iter().find(|(key, _)| *key == name).map(|(_, value)| value.as_str())
    }
}

impl std::fmt::Debug for Account {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let credential = self.credential.as_ref().map(|credential| credential.source());
        f.debug_struct("Account")
            .field("base_url", &self.base_url)
            .field("options", &self.options)
            .field("credential", &credential)
            .finish()
    }
}

/// What proving one request comes to.
pub type Authorizing<'a> = Pin<Box<dyn Future<Output = Result<(), ProviderError>> + Send + 'a>>;

/// How a provider's requests prove who sends them when a key header does
/// not: made once per provider at load, shared by all its requests, so a
/// token fetched for one serves them all.
pub trait Credential: Send + Sync {
    /// Proves `request` (signs it, or puts a token on it): the last step
    /// before it is sent. A credential that cannot (a failed token
    /// exchange) fails the attempt as `auth`.
    fn authorize<'a>(&'a self, request: &'a mut http::Request<Bytes>, egress: &'a Egress) -> Authorizing<'a>;

    /// Where the credential comes from, for `baton check` and the logs:
    /// never a secret's value.
    fn source(&self) -> String;

    /// The secret values it holds or has fetched, to scrub from anything a
    /// provider says back.
    fn secrets(&self) -> Vec<String>;

    /// The provider refused what [`Credential::authorize`] put on a request
    /// (401): a fetched token is dropped, so the next request gets another
    /// rather than every request failing until it expires.
    fn rejected(&self) {}
}
