//! The stdio client's requests and session, counted where its messages are read: rmcp serves a
//! handler on a transport, so a transport that counts each request on its way in sees every
//! method, typed or not, without a line in any handler method. Over HTTP the front counts them
//! (it parses each body anyway).

use std::borrow::Cow;

use rmcp::RoleServer;
use rmcp::model::{ClientRequest, JsonRpcMessage};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;

use super::{Metrics, SessionGuard};

/// The stdin/stdout transport counting each client request by method and the session by its
/// era (`initialize` when it opens with `initialize`, else stateless) from its first request
/// until it ends.
pub(crate) fn counted<T: Transport<RoleServer>>(inner: T, metrics: &Metrics) -> Counted<T> {
    Counted {
        inner,
        metrics: metrics.clone(),
        session: None,
    }
}

/// A transport that counts the requests read through it.
pub(crate) struct Counted<T> {
    inner: T,
    metrics: Metrics,
    session: Option<SessionGuard>,
}

impl<T: Transport<RoleServer>> Transport<RoleServer> for Counted<T> {
    type Error = T::Error;

    fn name() -> Cow<'static, str> {
        T::name()
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        let message = self.inner.receive().await?;
        if let JsonRpcMessage::Request(request) = &message {
            self.metrics.request(request.request.method());
            if self.session.is_none() {
                let era = match request.request {
                    ClientRequest::InitializeRequest(_) => "initialize",
                    _ => "stateless",
                };
                self.session = Some(self.metrics.session_open(era));
            }
        }
        Some(message)
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.session = None;
        self.inner.close()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[tokio::test]
    async fn each_request_is_counted_by_method_and_the_session_by_its_era() {
        let metrics = Metrics::new(&super::super::MetricsConfig::default());
        let (client, server) = tokio::io::duplex(4096);
        let (read, write) = tokio::io::split(server);
        let pipes = rmcp::transport::async_rw::AsyncRwTransport::new(read, write);
        let mut transport = counted(pipes, &metrics);
        let (_, mut to_server) = tokio::io::split(client);
        let lines = [
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"vendor/made_up","params":{}}"#,
        ];
        for line in lines {
            to_server
                .write_all(format!("{line}\n").as_bytes())
                .await
                .expect("write");
        }
        for _ in lines {
            transport.receive().await.expect("a message");
        }
        let page = metrics.encode().expect("on");
        for (method, n) in [("initialize", 1), ("tools/list", 1), ("other", 1)] {
            let line = format!("roster_client_requests_total{{method=\"{method}\"}} {n}");
            assert!(page.contains(&line), "{line} in\n{page}");
        }
        assert!(
            !page.contains("notifications/initialized"),
            "notifications are no requests"
        );
        let open = "roster_client_sessions{era=\"initialize\",transport=\"stdio\"}";
        assert!(page.contains(&format!("{open} 1")), "{page}");
        transport.close().await.expect("close");
        let page = metrics.encode().expect("on");
        assert!(page.contains(&format!("{open} 0")), "{page}");
    }
}
