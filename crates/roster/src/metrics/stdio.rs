//! The stdio client's requests and session, counted where its messages are read: rmcp serves a
//! handler on a transport, so a transport that counts each request on its way in sees every
//! method, typed or not, without a line in any handler method. Over HTTP the front counts them
//! (it parses each body anyway).

use std::borrow::Cow;

use rmcp::RoleServer;
use rmcp::model::{ClientRequest, JsonRpcMessage};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::async_rw::TransportAdapterAsyncRW;
use rmcp::transport::{IntoTransport, StdioReader, StdioWriter, Transport};

use super::{Metrics, SessionGuard};

/// The stdin/stdout pipes as a transport counting each client request by method and the
/// session by its era (`initialize` when it opens with `initialize`, else stateless) from its
/// first request until it ends.
pub(crate) fn counted(
    pipes: (StdioReader, StdioWriter),
    metrics: &Metrics,
) -> Counted<impl Transport<RoleServer, Error = std::io::Error> + use<>> {
    Counted {
        inner: IntoTransport::<RoleServer, _, TransportAdapterAsyncRW>::into_transport(pipes),
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
