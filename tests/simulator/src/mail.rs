//! An SMTP sink: a local mail server that accepts every message and keeps it,
//! so the demo and the tests can read the links the gateway's web console
//! sends (sign-up verification) without any real mail system.
//!
//! The SMTP side is `mailin-embedded` (blocking I/O on its own threads); it
//! is started only on request ([`crate::SimServer::start_smtp`], or the
//! binary's `--smtp-listen`), because that server cannot be stopped: its
//! threads live until the process ends. What it receives is shown at
//! `GET /_sim/mail` (oldest first) as `{from, to, subject, body, data}`:
//! `data` the message as received, `body` the part after the headers with
//! quoted-printable soft line breaks undone. `DELETE /_sim/mail` forgets them.
//! Plain SMTP only: no TLS, no authentication (credentials are accepted).

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

use serde::Serialize;

/// One message as received.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Mail {
    pub from: String,
    pub to: Vec<String>,
    pub subject: String,
    /// The text after the headers.
    pub body: String,
    /// The whole message (headers and body).
    pub data: String,
}

/// Every message received, shared with the HTTP control routes.
#[derive(Clone, Default)]
pub struct Mailbox(Arc<Mutex<Vec<Mail>>>);

impl Mailbox {
    pub fn snapshot(&self) -> Vec<Mail> {
        self.lock().clone()
    }

    pub fn clear(&self) {
        self.lock().clear();
    }

    fn push(&self, m: Mail) {
        let mut v = self.lock();
        // A bounded sink: the newest 1 000 messages.
        if v.len() >= 1000 {
            v.remove(0);
        }
        v.push(m);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Mail>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The per-connection SMTP handler (`mailin` clones it for each session).
#[derive(Clone)]
struct Sink {
    mailbox: Mailbox,
    from: String,
    to: Vec<String>,
    data: Vec<u8>,
}

impl mailin_embedded::Handler for Sink {
    fn mail(&mut self, _ip: IpAddr, _domain: &str, from: &str) -> mailin_embedded::Response {
        self.from = from.to_string();
        self.to.clear();
        self.data.clear();
        mailin_embedded::response::OK
    }

    fn rcpt(&mut self, to: &str) -> mailin_embedded::Response {
        self.to.push(to.to_string());
        mailin_embedded::response::OK
    }

    fn data(&mut self, buf: &[u8]) -> std::io::Result<()> {
        // A sink for small test messages: anything past 1 MiB is dropped.
        if self.data.len() + buf.len() <= 1 << 20 {
            self.data.extend_from_slice(buf);
        }
        Ok(())
    }

    fn data_end(&mut self) -> mailin_embedded::Response {
        let data = String::from_utf8_lossy(&self.data).replace("\r\n", "\n");
        let (head, body) = data.split_once("\n\n").unwrap_or((&data, ""));
        let subject = head
            .lines()
            .find_map(|l| {
                l.split_once(':')
                    .filter(|(k, _)| k.eq_ignore_ascii_case("subject"))
            })
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_default();
        let quoted = head.lines().any(|l| {
            l.to_ascii_lowercase()
                .starts_with("content-transfer-encoding: quoted-printable")
        });
        let body = if quoted {
            body.replace("=\n", "").replace("=3D", "=")
        } else {
            body.to_string()
        };
        self.mailbox.push(Mail {
            from: std::mem::take(&mut self.from),
            to: std::mem::take(&mut self.to),
            subject,
            body,
            data: data.clone(),
        });
        self.data.clear();
        mailin_embedded::response::OK
    }
}

/// Binds `addr` (port 0 picks a free port) and serves SMTP on background
/// threads into `mailbox`; returns the bound address.
pub fn serve(addr: SocketAddr, mailbox: Mailbox) -> anyhow::Result<SocketAddr> {
    let listener = std::net::TcpListener::bind(addr)
        .map_err(|e| anyhow::anyhow!("binding the SMTP sink to {addr}: {e}"))?;
    let bound = listener.local_addr()?;
    let mut server = mailin_embedded::Server::new(Sink {
        mailbox,
        from: String::new(),
        to: Vec::new(),
        data: Vec::new(),
    });
    server
        .with_name("upstream-sim")
        .with_num_threads(2)
        .with_tcp_listener(listener);
    std::thread::Builder::new()
        .name("smtp-sink".into())
        .spawn(move || {
            if let Err(e) = server.serve() {
                tracing::error!("SMTP sink stopped: {e}");
            }
        })?;
    Ok(bound)
}
