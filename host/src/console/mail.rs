//! Sending the console's e-mail (verification links) over SMTP with
//! `lettre`, as configured in `[console.smtp]`. A failed send is reported to
//! the caller, which tells the user; nothing is queued or retried.

use super::config::{SmtpConfig, SmtpTls};
use lettre::message::header::ContentType;
use lettre::message::Mailbox;
use lettre::transport::smtp::authentication::Credentials;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use std::time::Duration;

pub struct Mailer {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
}

impl Mailer {
    pub fn new(cfg: &SmtpConfig) -> anyhow::Result<Mailer> {
        let builder = match cfg.tls {
            SmtpTls::None => AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(&cfg.host),
            SmtpTls::Starttls => AsyncSmtpTransport::<Tokio1Executor>::starttls_relay(&cfg.host)?,
            SmtpTls::Tls => AsyncSmtpTransport::<Tokio1Executor>::relay(&cfg.host)?,
        };
        let mut builder = builder
            .port(cfg.port)
            .timeout(Some(Duration::from_secs(cfg.timeout_secs)));
        if let Some((user, password)) = &cfg.credentials {
            builder = builder.credentials(Credentials::new(user.clone(), password.clone()));
        }
        Ok(Mailer {
            transport: builder.build(),
            from: cfg.from.parse()?,
        })
    }

    /// Sends one plain-text message; the error says why it did not go out.
    pub async fn send(&self, to: &str, subject: &str, text: String) -> Result<(), String> {
        let to: Mailbox = to.parse().map_err(|e| format!("bad recipient: {e}"))?;
        let message = Message::builder()
            .from(self.from.clone())
            .to(to)
            .subject(subject)
            .header(ContentType::TEXT_PLAIN)
            .body(text)
            .map_err(|e| e.to_string())?;
        self.transport
            .send(message)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}
