//! Prices of the non-token meters: what an image, a character of speech, a
//! minute of transcribed audio, a rerank search unit or a request costs, per
//! model (`image_price` / `image_prices`, `character_price`,
//! `audio_minute_price`, `search_unit_price`, `request_price` in the model's
//! config; each defaults to nothing, so a model bills only the meters it
//! prices).
//!
//! - images: per image, by the meter's detail `SIZE/QUALITY`: an exact
//!   `image_prices` entry, else one for `SIZE`, else `image_price`;
//! - characters: per 1M characters, like tokens;
//! - audio: per minute, billed by the millisecond;
//! - search units and requests: per unit.
//!
//! Every part is rounded up to a whole quota unit, as token prices are.

use super::money::{per_million, Quota};
use super::usage::{Meter, MeterKind};
use std::collections::BTreeMap;

/// One model's meter prices, in quota units.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MeterPrices {
    /// Per image, any size and quality.
    pub image: Quota,
    /// Per image, by `SIZE/QUALITY` or `SIZE`.
    pub images: BTreeMap<String, Quota>,
    /// Per 1M characters of speech input.
    pub per_million_characters: Quota,
    /// Per minute of audio.
    pub audio_minute: Quota,
    pub search_unit: Quota,
    pub request: Quota,
}

impl MeterPrices {
    /// The price of one image of this detail (`SIZE/QUALITY`).
    pub fn image_price(&self, detail: Option<&str>) -> Quota {
        let Some(detail) = detail else {
            return self.image;
        };
        let size = detail.split('/').next().unwrap_or(detail);
        self.images
            .get(detail)
            .or_else(|| self.images.get(size))
            .copied()
            .unwrap_or(self.image)
    }

    /// What these meters cost.
    pub fn cost(&self, meters: &[Meter]) -> Quota {
        meters.iter().fold(0, |sum: Quota, m| {
            let q = m.quantity as i128;
            let part: i128 = match m.kind {
                MeterKind::Images => q * self.image_price(m.detail.as_deref()) as i128,
                MeterKind::Characters => {
                    per_million(m.quantity, self.per_million_characters) as i128
                }
                MeterKind::AudioMs => (q * self.audio_minute as i128 + 59_999) / 60_000,
                MeterKind::SearchUnits => q * self.search_unit as i128,
                MeterKind::Requests => q * self.request as i128,
            };
            sum.saturating_add(part.min(Quota::MAX as i128) as Quota)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meter(kind: MeterKind, quantity: u64, detail: Option<&str>) -> Meter {
        Meter {
            kind,
            quantity,
            detail: detail.map(str::to_owned),
        }
    }

    #[test]
    fn images_are_priced_by_size_and_quality_then_size_then_default() {
        let p = MeterPrices {
            image: 100,
            images: BTreeMap::from([("1024x1024/hd".into(), 300), ("1792x1024".into(), 200)]),
            ..MeterPrices::default()
        };
        assert_eq!(
            p.cost(&[meter(MeterKind::Images, 2, Some("1024x1024/hd"))]),
            600
        );
        assert_eq!(
            p.cost(&[meter(MeterKind::Images, 1, Some("1792x1024/standard"))]),
            200
        );
        assert_eq!(
            p.cost(&[meter(MeterKind::Images, 3, Some("512x512/standard"))]),
            300
        );
        assert_eq!(p.cost(&[meter(MeterKind::Images, 1, None)]), 100);
    }

    #[test]
    fn audio_is_billed_by_the_millisecond_rounded_up() {
        let p = MeterPrices {
            audio_minute: 3_000,
            ..MeterPrices::default()
        };
        assert_eq!(p.cost(&[meter(MeterKind::AudioMs, 60_000, None)]), 3_000);
        // 1.5 s of a 3000-per-minute price: 75.
        assert_eq!(p.cost(&[meter(MeterKind::AudioMs, 1_500, None)]), 75);
        assert_eq!(p.cost(&[meter(MeterKind::AudioMs, 1, None)]), 1);
    }

    #[test]
    fn characters_units_and_requests_add_up_and_unpriced_meters_are_free() {
        let p = MeterPrices {
            per_million_characters: 7_500_000,
            search_unit: 1_000,
            request: 10,
            ..MeterPrices::default()
        };
        let all = [
            meter(MeterKind::Characters, 1_000, None),
            meter(MeterKind::SearchUnits, 2, None),
            meter(MeterKind::Requests, 1, None),
            meter(MeterKind::Images, 5, Some("1024x1024/standard")),
        ];
        assert_eq!(p.cost(&all), 7_500 + 2_000 + 10);
        assert_eq!(MeterPrices::default().cost(&all), 0);
    }

    #[test]
    fn huge_quantities_saturate_instead_of_wrapping() {
        let p = MeterPrices {
            search_unit: Quota::MAX,
            request: Quota::MAX,
            ..MeterPrices::default()
        };
        let m = [
            meter(MeterKind::SearchUnits, u64::MAX, None),
            meter(MeterKind::Requests, u64::MAX, None),
        ];
        assert_eq!(p.cost(&m), Quota::MAX);
    }
}
