//! The legacy OpenAI dashboard billing endpoints, in the shapes that
//! dashboard-compatible clients (and one-api-style gateways) use:
//!
//! - `GET /v1/dashboard/billing/subscription` →
//!   `{object: "billing_subscription", has_payment_method, soft_limit_usd,
//!   hard_limit_usd, system_hard_limit_usd, access_until}`
//! - `GET /v1/dashboard/billing/usage?start_date=YYYY-MM-DD&end_date=YYYY-MM-DD`
//!   → `{object: "list", total_usage}` with `total_usage` in hundredths.
//!
//! Amounts are in the gateway's currency (CNY), whatever the `_usd` field
//! names say; clients compute "remaining = hard limit − usage". For a token
//! with a spending cap the figures are the token's (cap and spending);
//! otherwise the account's (everything credited, and what was spent of it).

use crate::auth::Caller;
use crate::error::ApiError;
use crate::state::SharedState;
use axum::extract::{Query, State};
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// `GET /v1/dashboard/billing/subscription`. Amounts in CNY.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Subscription {
    /// Always `billing_subscription`.
    pub object: &'static str,
    pub has_payment_method: bool,
    pub soft_limit_usd: f64,
    /// Everything credited to the account, or the token's spending cap.
    pub hard_limit_usd: f64,
    pub system_hard_limit_usd: f64,
    /// The token's expiry (Unix seconds), or 0.
    pub access_until: i64,
}

/// `GET /v1/dashboard/billing/usage`: hundredths of a CNY spent.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct UsageTotal {
    /// Always `list`.
    pub object: &'static str,
    pub total_usage: f64,
}

pub async fn subscription(
    State(state): State<SharedState>,
    caller: Caller,
) -> Result<Json<Subscription>, ApiError> {
    let cur = &state.config.currency;
    let limit = match caller.token.quota_limit {
        Some(cap) => cap,
        None => {
            let a = state
                .ledger
                .account(&caller.token.account_id)
                .ok_or(ApiError::InvalidToken)?;
            a.credited
        }
    };
    let hard = cur.to_cny(limit);
    Ok(Json(Subscription {
        object: "billing_subscription",
        has_payment_method: true,
        soft_limit_usd: hard,
        hard_limit_usd: hard,
        system_hard_limit_usd: hard,
        access_until: caller.token.expires_at.unwrap_or(0),
    }))
}

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct UsageRange {
    /// First day counted, `YYYY-MM-DD` (UTC).
    #[serde(default)]
    #[param(format = Date, example = "2026-11-01")]
    start_date: Option<String>,
    /// First day not counted (exclusive), `YYYY-MM-DD` (UTC).
    #[serde(default)]
    #[param(format = Date, example = "2026-12-01")]
    end_date: Option<String>,
}

/// `YYYY-MM-DD` → Unix seconds at 00:00 UTC.
fn day_start(field: &str, text: &str) -> Result<i64, ApiError> {
    let format = time::macros::format_description!("[year]-[month]-[day]");
    time::Date::parse(text, format)
        .map(|d| d.midnight().assume_utc().unix_timestamp())
        .map_err(|_| ApiError::InvalidRequest(format!("`{field}` must be a date like 2026-01-31")))
}

pub async fn usage(
    State(state): State<SharedState>,
    caller: Caller,
    Query(range): Query<UsageRange>,
) -> Result<Json<UsageTotal>, ApiError> {
    let cur = &state.config.currency;
    let whole_history = range.start_date.is_none() && range.end_date.is_none();
    let used = if whole_history {
        // What was spent: settled charges. For a capped token its own
        // spending, otherwise the account's.
        match caller.token.quota_limit {
            Some(_) => state
                .ledger
                .token(&caller.token.id)
                .map(|t| t.used)
                .unwrap_or(0),
            None => state
                .ledger
                .spent(&caller.token.account_id)
                .ok_or(ApiError::InvalidToken)?,
        }
    } else {
        let from = match &range.start_date {
            Some(d) => day_start("start_date", d)?,
            None => 0,
        };
        // The end date is exclusive, as in OpenAI's API.
        let to = match &range.end_date {
            Some(d) => day_start("end_date", d)? - 1,
            None => i64::MAX,
        };
        state
            .ledger
            .checkpoint()
            .await
            .map_err(ApiError::internal)?;
        let rows = state
            .store
            .usage_between(&caller.token.account_id, from, to)
            .map_err(ApiError::internal)?;
        let capped = caller.token.quota_limit.is_some();
        rows.iter()
            .filter(|u| !capped || u.token_id.as_deref() == Some(caller.token.id.as_str()))
            .map(|u| u.cost)
            .sum()
    };
    let total = cur.to_cny(used) * 100.0;
    Ok(Json(UsageTotal {
        object: "list",
        total_usage: (total * 1e4).round() / 1e4,
    }))
}

#[cfg(test)]
mod tests {
    #[test]
    fn dates() {
        assert_eq!(super::day_start("d", "1970-01-01").unwrap(), 0);
        assert_eq!(super::day_start("d", "2026-11-21").unwrap(), 1_795_219_200);
        assert_eq!(super::day_start("d", "2000-03-01").unwrap(), 951_868_800);
        assert!(super::day_start("d", "2026-13-01").is_err());
        assert!(super::day_start("d", "yesterday").is_err());
    }
}
