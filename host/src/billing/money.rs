//! Money as integers. Every amount the gateway stores or compares is a number of
//! quota units (`i64`); CNY appears only at the edges: prices read from the
//! config and figures shown to people. `1 CNY = quota_per_cny` units
//! (500_000 by default), so 1.40 CNY/s for 4 s is 2_800_000 units.

use rust_decimal::prelude::ToPrimitive;
use rust_decimal::Decimal;
use std::str::FromStr;

/// Quota units. Signed so a ledger entry can be a debit.
pub type Quota = i64;

/// Converts between CNY and quota units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Currency {
    pub quota_per_cny: i64,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum MoneyError {
    #[error("`{0}` is not a decimal amount")]
    NotDecimal(String),
    #[error("`{0}` must not be negative")]
    Negative(String),
    #[error("`{0}` is too large")]
    TooLarge(String),
}

impl Currency {
    pub fn new(quota_per_cny: i64) -> Self {
        Self { quota_per_cny }
    }

    /// Parses a CNY amount such as `"1.40"` into quota units, rounding to the
    /// nearest unit (half away from zero). Negative amounts are refused.
    pub fn parse_cny(&self, text: &str) -> Result<Quota, MoneyError> {
        let d = Decimal::from_str(text.trim()).map_err(|_| MoneyError::NotDecimal(text.into()))?;
        if d.is_sign_negative() && !d.is_zero() {
            return Err(MoneyError::Negative(text.into()));
        }
        self.decimal_to_quota(d)
            .ok_or_else(|| MoneyError::TooLarge(text.into()))
    }

    fn decimal_to_quota(&self, d: Decimal) -> Option<Quota> {
        let q = d.checked_mul(Decimal::from(self.quota_per_cny))?;
        q.round_dp_with_strategy(0, rust_decimal::RoundingStrategy::MidpointAwayFromZero)
            .to_i64()
    }

    /// Quota units as CNY, for JSON: exact to 6 decimals (what people read).
    pub fn to_cny(&self, quota: Quota) -> f64 {
        let d = Decimal::from(quota) / Decimal::from(self.quota_per_cny);
        d.round_dp(6).to_f64().unwrap_or(0.0)
    }

    /// Quota units as a CNY string with up to 6 decimals, trailing zeros trimmed.
    pub fn format_cny(&self, quota: Quota) -> String {
        let d = (Decimal::from(quota) / Decimal::from(self.quota_per_cny)).round_dp(6);
        d.normalize().to_string()
    }
}

/// `tokens × price_per_million / 1_000_000`, rounded up so a call is never
/// billed less than it cost; computed in 128 bits so it cannot overflow.
pub fn per_million(tokens: u64, price_per_million: Quota) -> Quota {
    let num = tokens as i128 * price_per_million as i128;
    let q = (num + 999_999) / 1_000_000;
    q.min(i64::MAX as i128) as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cny_round_trip() {
        let c = Currency::new(500_000);
        assert_eq!(c.parse_cny("1.40").unwrap(), 700_000);
        assert_eq!(c.parse_cny("5").unwrap(), 2_500_000);
        assert_eq!(c.parse_cny("0.000001").unwrap(), 1); // 0.5 rounds away from zero
        assert_eq!(c.to_cny(2_800_000), 5.6);
        assert_eq!(c.format_cny(2_800_000), "5.6");
        assert_eq!(c.format_cny(1), "0.000002");
        assert!(matches!(c.parse_cny("-1"), Err(MoneyError::Negative(_))));
        assert!(matches!(c.parse_cny("abc"), Err(MoneyError::NotDecimal(_))));
    }

    #[test]
    fn per_million_rounds_up() {
        assert_eq!(per_million(0, 550_000), 0);
        assert_eq!(per_million(1, 550_000), 1);
        assert_eq!(per_million(1_000_000, 550_000), 550_000);
        assert_eq!(per_million(3, 1_000_000), 3);
        assert_eq!(per_million(u64::MAX, i64::MAX), i64::MAX);
    }
}
