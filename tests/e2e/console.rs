//! The web console (issue 14): sign-up with e-mail verification through the
//! simulator's SMTP sink, login and its rate limit, CSRF, cookie flags,
//! tokens with their controls (the key shown once, working on the public
//! API), one customer not reaching another's things, and the operator pages
//! behind the admin key. Driven over HTTP like a browser: a cookie-keeping
//! client that follows no redirects, so each answer can be checked.

use crate::common::{Env, Setup, ADMIN_KEY};
use gateway::clock::Clock as _;
use reqwest::{redirect, Client, StatusCode};
use serde_json::{json, Value};
use upstream_sim::mail::{serve as smtp_sink, Mailbox};

const PASSWORD: &str = "correct horse battery";

/// A gateway with the console on, mailing through a fresh SMTP sink.
struct Console {
    env: Env,
    mailbox: Mailbox,
}

/// The `[console]` section: `smtp_port` is the sink's port.
fn console_section(smtp_port: u16, extra: &str) -> String {
    format!(
        r#"
[console]
listen = "127.0.0.1:0"
login_attempts_per_email = 3
login_attempts_per_ip = 6
login_window_secs = 600
{extra}

[console.smtp]
host = "127.0.0.1"
port = {smtp_port}
tls = "none"
from = "Gateway <console@gateway.test>"
"#
    )
}

impl Console {
    async fn start() -> Console {
        Console::with("").await
    }

    async fn with(extra: &str) -> Console {
        let mailbox = Mailbox::default();
        let addr = smtp_sink("127.0.0.1:0".parse().unwrap(), mailbox.clone()).unwrap();
        let env = Env::with(Setup {
            extra: console_section(addr.port(), extra),
            ..Setup::default()
        })
        .await;
        Console { env, mailbox }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.env.gw.console_addr.unwrap())
    }

    /// A browser: keeps cookies, does not follow redirects.
    fn browser(&self) -> Client {
        Client::builder()
            .cookie_store(true)
            .redirect(redirect::Policy::none())
            .build()
            .unwrap()
    }

    async fn get(&self, b: &Client, path: &str) -> (StatusCode, String) {
        let resp = b.get(self.url(path)).send().await.unwrap();
        (resp.status(), resp.text().await.unwrap())
    }

    /// Posts a form; `csrf` is added unless the form has one.
    async fn post(&self, b: &Client, path: &str, form: &[(&str, &str)]) -> reqwest::Response {
        b.post(self.url(path)).form(form).send().await.unwrap()
    }

    /// The CSRF token of the form on `page`.
    async fn csrf(&self, b: &Client, page: &str) -> String {
        let (s, html) = self.get(b, page).await;
        assert_eq!(s, 200, "{page}: {html}");
        field(&html, "name=\"csrf\" value=\"").expect("a CSRF field")
    }

    /// Signs up `email` and returns the link from the e-mail.
    async fn sign_up(&self, b: &Client, email: &str) -> String {
        let before = self.mailbox.snapshot().len();
        let csrf = self.csrf(b, "/signup").await;
        let resp = self
            .post(
                b,
                "/signup",
                &[("csrf", &csrf), ("email", email), ("password", PASSWORD)],
            )
            .await;
        let status = resp.status();
        let page = resp.text().await.unwrap();
        assert_eq!(status, 200, "{page}");
        assert!(page.contains("Check your e-mail"), "{page}");
        let mail = self.mailbox.snapshot();
        assert_eq!(mail.len(), before + 1, "one message sent");
        let m = mail.last().unwrap();
        assert_eq!(m.to, vec![email.to_lowercase()]);
        assert!(m.subject.contains("Activate"), "{}", m.subject);
        link(&m.body)
    }

    /// Signs up, verifies and logs in; returns the browser and account id.
    async fn customer(&self, email: &str) -> (Client, String) {
        let b = self.browser();
        let link = self.sign_up(&b, email).await;
        let (s, page) = self.get(&b, &path_of(&link)).await;
        assert_eq!(s, 200, "{page}");
        self.login_ok(&b, email).await;
        let (s, page) = self.get(&b, "/account").await;
        assert_eq!(s, 200, "{page}");
        let account = field(&page, "Account <code>").unwrap();
        (b, account)
    }

    async fn login(&self, b: &Client, email: &str, password: &str) -> reqwest::Response {
        let csrf = self.csrf(b, "/login").await;
        self.post(
            b,
            "/login",
            &[("csrf", &csrf), ("email", email), ("password", password)],
        )
        .await
    }

    /// Logs in with the right password; returns the answer (a redirect).
    async fn login_ok(&self, b: &Client, email: &str) -> reqwest::Response {
        let resp = self.login(b, email, PASSWORD).await;
        assert_eq!(resp.status(), StatusCode::SEE_OTHER);
        assert_eq!(resp.headers()["location"], "/account");
        resp
    }

    /// Creates a token through the token form; returns its key and the page.
    async fn create_token(&self, b: &Client, form: &[(&str, &str)]) -> (String, String) {
        let csrf = self.csrf(b, "/tokens").await;
        let mut f = vec![("csrf", csrf.as_str())];
        f.extend_from_slice(form);
        let resp = self.post(b, "/tokens", &f).await;
        let status = resp.status();
        let page = resp.text().await.unwrap();
        assert_eq!(status, 200, "{page}");
        let key = field(&page, "id=\"new-key\">").expect("the key is shown");
        (key, page)
    }
}

/// The text after `marker` up to the next `"` or `<`.
fn field(html: &str, marker: &str) -> Option<String> {
    let start = html.find(marker)? + marker.len();
    let rest = &html[start..];
    let end = rest.find(['"', '<'])?;
    Some(rest[..end].to_string())
}

/// The first http link in a mail body.
fn link(body: &str) -> String {
    let start = body.find("http://").expect("a link in the mail");
    body[start..].split_whitespace().next().unwrap().to_string()
}

fn path_of(link: &str) -> String {
    let after = link.strip_prefix("http://").unwrap();
    after[after.find('/').unwrap()..].to_string()
}

/// The token id on a tokens page row whose name is `name`.
fn token_id(page: &str, name: &str) -> String {
    let row_end = page
        .find(&format!("<td>{name}</td>"))
        .expect("the token row");
    let row_start = page[..row_end].rfind("data-token=\"").unwrap() + "data-token=\"".len();
    page[row_start..row_start + page[row_start..].find('"').unwrap()].to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sign_up_needs_the_emailed_link_which_works_once_and_gives_the_trial_credit() {
    let c = Console::start().await;
    let b = c.browser();
    let link = c.sign_up(&b, "Ann@Example.com").await;
    assert!(link.starts_with(&c.url("/verify?token=")), "{link}");

    // Not active before the link is opened: no account, no login.
    let accounts_before = c.env.gw.state.ledger.accounts().len();
    let resp = c.login(&b, "ann@example.com", PASSWORD).await;
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(c.env.gw.state.ledger.accounts().len(), accounts_before);

    let (s, page) = c.get(&b, &path_of(&link)).await;
    assert_eq!(s, 200, "{page}");
    assert!(page.contains("is verified"), "{page}");
    assert!(page.contains("5.000000 CNY of trial credit"), "{page}");
    assert_eq!(c.env.gw.state.ledger.accounts().len(), accounts_before + 1);

    // Single use.
    let (s, page) = c.get(&b, &path_of(&link)).await;
    assert_eq!(s, 404, "{page}");
    assert!(page.contains("not valid"), "{page}");
    assert_eq!(c.env.gw.state.ledger.accounts().len(), accounts_before + 1);
    let (s, _) = c.get(&b, "/verify?token=0123").await;
    assert_eq!(s, 404);

    // Logged in: the account page shows balance and trial credit.
    c.login_ok(&b, "ann@example.com").await;
    let (s, page) = c.get(&b, "/account").await;
    assert_eq!(s, 200);
    assert!(page.contains("Trial credit"), "{page}");
    assert!(page.contains("5.000000 CNY"), "{page}");
    assert!(page.contains("<svg"), "the usage chart");
    c.env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_link_is_refused_and_a_new_sign_up_sends_a_new_one() {
    let c = Console::start().await;
    let b = c.browser();
    let old = c.sign_up(&b, "late@example.com").await;
    c.env.clock.advance_secs(24 * 3600 + 1);
    let (s, page) = c.get(&b, &path_of(&old)).await;
    assert_eq!(s, 410, "{page}");
    assert!(page.contains("expired"), "{page}");
    let resp = c.login(&b, "late@example.com", PASSWORD).await;
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);

    let new = c.sign_up(&b, "late@example.com").await;
    assert_ne!(new, old);
    let (s, _) = c.get(&b, &path_of(&new)).await;
    assert_eq!(s, 200);
    c.login_ok(&b, "late@example.com").await;
    c.env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_mail_there_is_no_activation() {
    // An SMTP port nobody listens on.
    let unused = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = unused.local_addr().unwrap().port();
    drop(unused);
    let env = Env::with(Setup {
        extra: console_section(port, ""),
        ..Setup::default()
    })
    .await;
    let c = Console {
        env,
        mailbox: Mailbox::default(),
    };
    let b = c.browser();
    let csrf = c.csrf(&b, "/signup").await;
    let resp = c
        .post(
            &b,
            "/signup",
            &[
                ("csrf", &csrf),
                ("email", "x@example.com"),
                ("password", PASSWORD),
            ],
        )
        .await;
    assert_eq!(resp.status(), 502);
    let page = resp.text().await.unwrap();
    assert!(page.contains("could not be sent"), "{page}");
    let user = c.env.gw.state.store.user("x@example.com").unwrap().unwrap();
    assert!(!user.verified && user.account_id.is_none());
    let resp = c.login(&b, "x@example.com", PASSWORD).await;
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    c.env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_passwords_are_refused_and_login_attempts_are_rate_limited() {
    let c = Console::start().await;
    let (_, _) = c.customer("bob@example.com").await;
    let b = c.browser();
    // The customer's own login counted one attempt for this e-mail; two more
    // wrong ones reach the limit of 3.
    for _ in 0..2 {
        let resp = c.login(&b, "bob@example.com", "wrong password!").await;
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
        let page = resp.text().await.unwrap();
        assert!(page.contains("wrong e-mail or password"), "{page}");
    }
    let resp = c.login(&b, "bob@example.com", PASSWORD).await;
    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    let page = resp.text().await.unwrap();
    assert!(
        page.contains("too many login attempts; try again in 600 s"),
        "{page}"
    );
    // Per address too: other e-mails from the same client, up to 6 in all.
    for i in 0..3 {
        let resp = c.login(&b, &format!("nobody{i}@example.com"), "x").await;
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    }
    let resp = c.login(&b, "nobody9@example.com", "x").await;
    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    // The window is the gateway's clock.
    c.env.clock.advance_secs(601);
    c.login_ok(&b, "bob@example.com").await;
    c.env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_form_needs_its_csrf_token() {
    let c = Console::start().await;
    let (b, _) = c.customer("carol@example.com").await;
    let good = c.csrf(&b, "/tokens").await;

    // Missing and wrong tokens on a logged-in form.
    let wrong = "0".repeat(64);
    let missing: &[(&str, &str)] = &[("name", "t1")];
    let bad: &[(&str, &str)] = &[("csrf", &wrong), ("name", "t1")];
    for form in [missing, bad] {
        let resp = c.post(&b, "/tokens", form).await;
        assert_eq!(resp.status(), 403);
        assert!(resp.text().await.unwrap().contains("reload the page"));
    }
    // The right token, but from another site.
    let resp = b
        .post(c.url("/tokens"))
        .header("origin", "http://evil.example")
        .form(&[("csrf", good.as_str()), ("name", "t1")])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
    assert!(c.env.gw.state.ledger.accounts().iter().all(|a| c
        .env
        .gw
        .state
        .ledger
        .tokens_of(&a.id)
        .is_empty()));
    // Logout is a form too.
    let resp = c.post(&b, "/logout", &[]).await;
    assert_eq!(resp.status(), 403);

    // Before login: the sign-up and login forms carry the cookie's token.
    let fresh = c.browser();
    let resp = c
        .post(
            &fresh,
            "/login",
            &[("email", "carol@example.com"), ("password", PASSWORD)],
        )
        .await;
    assert_eq!(resp.status(), 403);
    let resp = c
        .post(
            &fresh,
            "/signup",
            &[
                ("csrf", &good),
                ("email", "d@example.com"),
                ("password", PASSWORD),
            ],
        )
        .await;
    assert_eq!(resp.status(), 403, "another session's token");
    let resp = c
        .post(&fresh, "/operator/login", &[("key", ADMIN_KEY)])
        .await;
    assert_eq!(resp.status(), 403);
    c.env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_cookie_is_secure_httponly_strict_and_logout_ends_it() {
    let c = Console::start().await;
    let b = c.browser();
    let link = c.sign_up(&b, "dan@example.com").await;
    c.get(&b, &path_of(&link)).await;
    let resp = c.login_ok(&b, "dan@example.com").await;
    let set = resp.headers()["set-cookie"].to_str().unwrap().to_string();
    assert!(set.starts_with("gw_session="), "{set}");
    for flag in [
        "HttpOnly",
        "SameSite=Strict",
        "Path=/",
        "Secure",
        "Max-Age=604800",
    ] {
        assert!(set.contains(flag), "{flag} in {set}");
    }
    let session = set.split(';').next().unwrap().to_string();
    let (s, _) = c.get(&b, "/account").await;
    assert_eq!(s, 200);

    let csrf = c.csrf(&b, "/account").await;
    let resp = c.post(&b, "/logout", &[("csrf", &csrf)]).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert!(resp.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .contains("Max-Age=0"));
    // The old cookie, replayed, no longer opens anything.
    let resp = reqwest::Client::builder()
        .redirect(redirect::Policy::none())
        .build()
        .unwrap()
        .get(c.url("/account"))
        .header("cookie", &session)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(resp.headers()["location"], "/login");

    // Sessions expire by the gateway's clock.
    c.login_ok(&b, "dan@example.com").await;
    c.env.clock.advance_secs(7 * 24 * 3600);
    let (s, _) = c.get(&b, "/account").await;
    assert_eq!(s, StatusCode::SEE_OTHER);
    c.env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_made_in_the_console_has_its_controls_its_key_once_and_works() {
    let c = Console::start().await;
    let (b, account) = c.customer("erin@example.com").await;
    let expiry = time::OffsetDateTime::from_unix_timestamp(c.env.clock.now_ms() / 1000 + 86_400)
        .unwrap()
        .format(time::macros::format_description!(
            "[year]-[month]-[day]T[hour]:[minute]"
        ))
        .unwrap();
    let (key, page) = c
        .create_token(
            &b,
            &[
                ("name", "ci"),
                ("models", "gpt-4o-mini"),
                ("models", "qwen-plus"),
                ("ips", "127.0.0.1, 10.0.0.0/8"),
                ("quota_cny", "1.5"),
                ("expires_at", &expiry),
            ],
        )
        .await;
    assert!(key.starts_with("sk-"), "{key}");
    assert!(page.contains("shown only this once"), "{page}");
    let t = c.env.gw.state.ledger.tokens_of(&account);
    assert_eq!(t.len(), 1);
    let t = &t[0];
    assert_eq!(t.name, "ci");
    assert_eq!(
        t.models.as_deref(),
        Some(&["gpt-4o-mini".to_string(), "qwen-plus".to_string()][..])
    );
    assert_eq!(
        t.ips.as_deref(),
        Some(&["127.0.0.1".to_string(), "10.0.0.0/8".to_string()][..])
    );
    assert_eq!(t.quota_limit, Some(750_000));
    assert_eq!(t.expires_at.map(|e| e % 60), Some(0));
    assert!(t.expires_at.unwrap() > c.env.clock.now_ms() / 1000);

    // The key works on the public API, within its whitelist.
    let hello = json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]});
    let resp = c.env.chat(&key, hello.clone()).await;
    assert_eq!(resp.status(), 200);
    let resp = c
        .env
        .chat(
            &key,
            json!({"model": "deepseek-reasoner", "messages": [{"role": "user", "content": "hi"}]}),
        )
        .await;
    assert_eq!(resp.status(), 403);

    // Listed afterwards without its key; the call shows in usage.
    let (_, list) = c.get(&b, "/tokens").await;
    assert!(!list.contains(&key));
    assert!(list.contains(&t.key_hint));
    assert!(list.contains("gpt-4o-mini, qwen-plus"), "{list}");
    assert!(list.contains("1.500000"), "{list}");
    let (_, usage) = c.get(&b, "/usage").await;
    assert!(usage.contains("id=\"usage-rows\""), "{usage}");
    assert!(usage.contains("gpt-4o-mini"), "{usage}");
    assert!(usage.contains("<td>ci</td>"), "{usage}");
    assert!(
        usage.contains("data-calls=\"1\""),
        "the chart counts the call: {usage}"
    );

    // Bad controls are refused with the reason.
    let csrf = c.csrf(&b, "/tokens").await;
    let resp = c
        .post(
            &b,
            "/tokens",
            &[("csrf", &csrf), ("name", "x"), ("ips", "not-an-ip")],
        )
        .await;
    assert_eq!(resp.status(), 400);
    let page = resp.text().await.unwrap();
    assert!(page.contains("`not-an-ip` is not an IP address"), "{page}");
    let resp = c
        .post(
            &b,
            "/tokens",
            &[("csrf", &csrf), ("name", "x"), ("models", "no-such-model")],
        )
        .await;
    assert_eq!(resp.status(), 400);

    // Disable, then delete.
    let id = token_id(&list, "ci");
    let resp = c
        .post(&b, &format!("/tokens/{id}/disable"), &[("csrf", &csrf)])
        .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(c.env.chat(&key, hello.clone()).await.status(), 401);
    let (_, list) = c.get(&b, "/tokens").await;
    assert!(list.contains("status-disabled"), "{list}");
    let resp = c
        .post(&b, &format!("/tokens/{id}/delete"), &[("csrf", &csrf)])
        .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let (_, list) = c.get(&b, "/tokens").await;
    assert!(!list.contains(&id), "{list}");
    assert_eq!(c.env.chat(&key, hello).await.status(), 401);
    c.env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_log_in_with_the_admin_key_and_customers_stay_out() {
    let c = Console::start().await;
    let (customer, account) = c.customer("fay@example.com").await;
    for page in ["/operator", "/operator/channels", "/operator/plugins"] {
        let (s, body) = c.get(&customer, page).await;
        assert_eq!(s, 403, "{page}");
        assert!(body.contains("Operator login"), "{body}");
        let (s, _) = c.get(&c.browser(), page).await;
        assert_eq!(s, 403, "{page} without a session");
    }
    let csrf = c.csrf(&customer, "/account").await;
    let resp = c
        .post(
            &customer,
            &format!("/operator/accounts/{account}/topup"),
            &[("csrf", &csrf), ("cny", "9")],
        )
        .await;
    assert_eq!(resp.status(), 403);

    let op = c.browser();
    let csrf = c.csrf(&op, "/operator/login").await;
    let resp = c
        .post(
            &op,
            "/operator/login",
            &[("csrf", &csrf), ("key", "wrong-key-0123456789")],
        )
        .await;
    assert_eq!(resp.status(), 401);
    let resp = c
        .post(
            &op,
            "/operator/login",
            &[("csrf", &csrf), ("key", ADMIN_KEY)],
        )
        .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let (s, page) = c.get(&op, "/operator").await;
    assert_eq!(s, 200);
    assert!(page.contains(&account), "{page}");
    let csrf = field(&page, "name=\"csrf\" value=\"").unwrap();
    let resp = c
        .post(
            &op,
            &format!("/operator/accounts/{account}/topup"),
            &[("csrf", &csrf), ("cny", "10")],
        )
        .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        c.env.gw.state.ledger.account(&account).unwrap().balance,
        15 * 500_000
    );
    let (_, page) = c.get(&op, "/operator/channels").await;
    assert!(
        page.contains("sim-anthropic") && page.contains("healthy"),
        "{page}"
    );
    let (_, page) = c.get(&op, "/operator/plugins").await;
    for name in ["openai", "anthropic", "gemini", "keep-thinking"] {
        assert!(page.contains(&format!("<td>{name}</td>")), "{name}: {page}");
    }
    let (_, admin) = c
        .env
        .admin(reqwest::Method::GET, "/admin/v1/plugins", None)
        .await;
    let version = admin["data"][0]["version"].as_str().unwrap();
    assert!(page.contains(&format!("<td>{version}</td>")), "{page}");
    // An operator is not a customer.
    let (s, _) = c.get(&op, "/tokens").await;
    assert_eq!(s, StatusCode::SEE_OTHER);
    c.env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_customer_sees_and_resends_only_their_own_things() {
    let c = Console::start().await;
    let (a, account_a) = c.customer("gus@example.com").await;
    let (b, _) = c.customer("hal@example.com").await;
    // Enough money for a video task (5.60 CNY) on A.
    c.env
        .gw
        .state
        .ledger
        .top_up(&account_a, 5_000_000, "test", c.env.clock.now_ms() / 1000)
        .await
        .unwrap();
    let (key_a, _) = c.create_token(&a, &[("name", "a-token")]).await;
    let (_, tokens_a) = c.get(&a, "/tokens").await;
    let token_a = token_id(&tokens_a, "a-token");

    let resp = c
        .env
        .post(
            &key_a,
            "/v1/videos",
            json!({"model": "video-fast", "prompt": "p", "seconds": "4", "webhook_url": "http://127.0.0.1:9/hook"}),
        )
        .await;
    assert_eq!(resp.status(), 200);
    let task: Value = resp.json().await.unwrap();
    let task_id = task["id"].as_str().unwrap().to_string();
    c.env.run_to_end(&key_a, &task_id).await;
    c.env.dispatch().await;
    let event = c.env.gw.state.store.events(None, 10).unwrap();
    assert_eq!(event.len(), 1);
    let event_id = event[0].event_id.clone();

    // A sees the task with its billing and the delivery.
    let (_, videos) = c.get(&a, "/videos").await;
    assert!(videos.contains(&task_id), "{videos}");
    assert!(videos.contains("5.600000"), "charged: {videos}");
    let (_, hooks) = c.get(&a, "/webhooks").await;
    assert!(hooks.contains(&event_id), "{hooks}");

    // B sees none of it and can touch none of it.
    let (_, videos) = c.get(&b, "/videos").await;
    assert!(!videos.contains(&task_id));
    let (_, hooks) = c.get(&b, "/webhooks").await;
    assert!(!hooks.contains(&event_id));
    let (_, usage) = c.get(&b, "/usage").await;
    assert!(!usage.contains("video-fast"));
    let csrf_b = c.csrf(&b, "/tokens").await;
    for path in [
        format!("/webhooks/{event_id}/resend"),
        format!("/tokens/{token_a}/disable"),
        format!("/tokens/{token_a}/delete"),
    ] {
        let resp = c.post(&b, &path, &[("csrf", &csrf_b)]).await;
        assert_eq!(resp.status(), 404, "{path}");
    }
    assert_eq!(
        c.env.gw.state.ledger.token(&token_a).unwrap().status,
        gateway::store::records::TokenStatus::Active
    );
    let before = c.env.gw.state.store.event(&event_id).unwrap().unwrap();

    // A re-sends: the event is due now, so the dispatcher tries it again
    // (and fails again: nothing listens there).
    let csrf_a = c.csrf(&a, "/webhooks").await;
    let resp = c
        .post(
            &a,
            &format!("/webhooks/{event_id}/resend"),
            &[("csrf", &csrf_a)],
        )
        .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    c.env.dispatch().await;
    let after = c.env.gw.state.store.event(&event_id).unwrap().unwrap();
    assert_eq!(after.state, gateway::store::video::EventStatus::Pending);
    assert_eq!(after.attempts, before.attempts + 1, "{before:?} {after:?}");
    let (_, hooks) = c.get(&a, "/webhooks").await;
    assert!(
        hooks.contains(&format!("<td class=\"num\">{}</td>", after.attempts)),
        "{hooks}"
    );
    c.env.stop().await;
}
