//! The misbehaviours themselves. Each must survive the optimiser: a loop or
//! an allocation the compiler can prove useless would be deleted and the
//! host's limits never exercised.

use std::hint::black_box;

use gateway_guest_sdk::bindings::types::{
    AnswerMode, Header, RequestBody, Translated, UpstreamRequest,
};

/// Spins until the host's epoch deadline interrupts it.
pub fn spin_forever() -> ! {
    let mut turns: u64 = 0;
    loop {
        turns = black_box(turns.wrapping_add(1));
    }
}

/// Keeps allocating 1 MiB blocks and writing to every byte, so linear memory
/// really grows until the host's memory limit refuses it and the failed
/// allocation aborts the guest.
pub fn exhaust_memory() -> ! {
    const BLOCK: usize = 1 << 20;
    let mut hoard: Vec<Vec<u8>> = Vec::new();
    loop {
        // Non-zero so the pages are written, not left as fresh zeroed memory.
        hoard.push(black_box(vec![0xA5; BLOCK]));
        black_box(&hoard);
    }
}

/// Executes `unreachable`.
pub fn trap() -> ! {
    #[cfg(target_arch = "wasm32")]
    core::arch::wasm32::unreachable();
    // Natively (only ever compiled, never called by tests) the nearest thing.
    #[cfg(not(target_arch = "wasm32"))]
    std::process::abort();
}

/// A request no HTTP client may send: every field is malformed.
pub fn garbage_request() -> UpstreamRequest {
    UpstreamRequest {
        method: "NOT A METHOD".to_owned(),
        path: "no-leading-slash\r\nx".to_owned(),
        headers: vec![Header {
            name: "bad header\n".to_owned(),
            value: "x".to_owned(),
        }],
        body: RequestBody::Bytes(vec![0xFF; 4]),
        answer: AnswerMode::Translate,
        state: String::new(),
    }
}

/// An answer no HTTP server may give: status 0 and a newline as content type.
pub fn garbage_response() -> Translated {
    Translated {
        status: 0,
        content_type: "\n".to_owned(),
        body: vec![0xFF; 4],
        usage: None,
    }
}

/// An answer body with one more top-level member than `body`.
pub fn lie_in(body: Vec<u8>) -> Vec<u8> {
    match serde_json::from_slice::<serde_json::Value>(&body) {
        Ok(serde_json::Value::Object(mut members)) => {
            members.insert("lie".to_owned(), serde_json::Value::Bool(true));
            serde_json::to_vec(&members).unwrap_or(body)
        }
        _ => body,
    }
}

/// `request` (the driver's, which says calls alike get the host's edit of
/// their body) with a member the host's edit never adds (see [`lie_in`]).
pub fn not_the_hosts_edit(mut request: UpstreamRequest) -> UpstreamRequest {
    if let RequestBody::Bytes(body) = request.body {
        request.body = RequestBody::Bytes(lie_in(body));
    }
    request
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_is_as_promised() {
        let request = garbage_request();
        assert_eq!(request.method, "NOT A METHOD");
        assert_eq!(request.path, "no-leading-slash\r\nx");
        assert_eq!(request.headers[0].name, "bad header\n");
        assert_eq!(request.body, RequestBody::Bytes(vec![0xFF; 4]));
        let response = garbage_response();
        assert_eq!(response.status, 0);
        assert_eq!(response.content_type, "\n");
        assert_eq!(lie_in(br#"{"a":1}"#.to_vec()), br#"{"a":1,"lie":true}"#);
    }
}
