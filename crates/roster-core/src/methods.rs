//! The MCP methods roster names, each in one table: the requests a client may send, with what
//! roster does with each, and the notifications a server may send. The gateway reads it to
//! answer a request rmcp could not type; the metrics to keep their method labels bounded.

/// A request method a client may send (2025-06-18, 2025-11-25, 2026-07-28, and the extensions
/// roster serves).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClientRequest {
    /// The method.
    pub name: &'static str,
    /// roster's front answers it (the rest are counted by name, and unknown to the front).
    pub served: bool,
    /// 2026-07-28 removed it (SEP-2575): in that era it is an unknown method.
    pub removed_in_2026_07_28: bool,
}

const fn served(name: &'static str) -> ClientRequest {
    ClientRequest {
        name,
        served: true,
        removed_in_2026_07_28: false,
    }
}

const fn served_before_2026(name: &'static str) -> ClientRequest {
    ClientRequest {
        name,
        served: true,
        removed_in_2026_07_28: true,
    }
}

const fn known(name: &'static str) -> ClientRequest {
    ClientRequest {
        name,
        served: false,
        removed_in_2026_07_28: false,
    }
}

/// Every request method a client may send roster.
pub const CLIENT_REQUESTS: &[ClientRequest] = &[
    served_before_2026("initialize"),
    served("ping"),
    served("server/discover"),
    served("subscriptions/listen"),
    served("tools/list"),
    served("tools/call"),
    served("prompts/list"),
    served("prompts/get"),
    served("resources/list"),
    served("resources/templates/list"),
    served("resources/read"),
    served_before_2026("resources/subscribe"),
    served_before_2026("resources/unsubscribe"),
    known("resources/directory/read"),
    served("completion/complete"),
    served_before_2026("logging/setLevel"),
    served("tasks/get"),
    served("tasks/update"),
    served("tasks/cancel"),
    known("tasks/list"),
    known("tasks/result"),
    served("skills/list"),
    known("skills/get"),
];

/// The request `name`, if it is one a client may send.
pub fn client_request(name: &str) -> Option<&'static ClientRequest> {
    CLIENT_REQUESTS.iter().find(|request| request.name == name)
}

/// The notification methods of the specification a server may send.
pub const SERVER_NOTIFICATIONS: &[&str] = &[
    "notifications/tools/list_changed",
    "notifications/prompts/list_changed",
    "notifications/resources/list_changed",
    "notifications/resources/updated",
    "notifications/progress",
    "notifications/message",
    "notifications/cancelled",
    "notifications/tasks/status",
    "notifications/elicitation/complete",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_method_is_named_once_and_the_removed_ones_are_served_before_2026() {
        let mut names: Vec<&str> = CLIENT_REQUESTS.iter().map(|r| r.name).collect();
        names.sort_unstable();
        let count = names.len();
        names.dedup();
        assert_eq!(names.len(), count, "a method named twice");
        for request in CLIENT_REQUESTS {
            assert!(
                !request.removed_in_2026_07_28 || request.served,
                "{}",
                request.name
            );
        }
        assert_eq!(client_request("tools/call").map(|r| r.served), Some(true));
        let removed: Vec<&str> = CLIENT_REQUESTS
            .iter()
            .filter(|r| r.removed_in_2026_07_28)
            .map(|r| r.name)
            .collect();
        assert_eq!(
            removed,
            [
                "initialize",
                "resources/subscribe",
                "resources/unsubscribe",
                "logging/setLevel"
            ],
            "SEP-2575's removed requests"
        );
        assert_eq!(client_request("skills/get").map(|r| r.served), Some(false));
        assert_eq!(client_request("tools/call "), None);
    }
}
