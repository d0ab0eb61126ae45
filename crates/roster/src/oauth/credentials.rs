//! One server's record in the [`Tokens`] store as rmcp's [`CredentialStore`]: what the OAuth client
//! saves (after a login, a refresh, a client-credentials exchange) is written through at once.

use std::sync::Arc;

use rmcp::transport::auth::AuthError;
use rmcp::transport::{CredentialStore, StoredCredentials};

use crate::store::Tokens;

/// One server's credentials in the token store, for the tokens got for `url` only.
pub(crate) struct ServerCredentials {
    pub(crate) store: Arc<dyn Tokens>,
    pub(crate) server: String,
    pub(crate) url: String,
}

fn store_error(error: impl std::fmt::Display) -> AuthError {
    AuthError::CredentialStoreError(error.to_string())
}

impl ServerCredentials {
    /// The stored credentials, if there are any for this server's URL: tokens got for another
    /// URL (the config changed) are never sent to this one.
    pub(crate) fn read(&self) -> Result<Option<StoredCredentials>, AuthError> {
        let Some(record) = self.store.load(&self.server).map_err(store_error)? else {
            return Ok(None);
        };
        if record.url != self.url {
            return Ok(None);
        }
        serde_json::from_str(&record.credentials)
            .map(Some)
            .map_err(|e| store_error(format!("stored credentials of `{}`: {e}", self.server)))
    }
}

#[async_trait::async_trait]
impl CredentialStore for ServerCredentials {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        self.read()
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let text = serde_json::to_string(&credentials).map_err(store_error)?;
        self.store
            .save(&self.server, &self.url, &text)
            .map(drop)
            .map_err(store_error)
    }

    async fn clear(&self) -> Result<(), AuthError> {
        self.store
            .clear(&self.server)
            .map(drop)
            .map_err(store_error)
    }
}
