//! When the gateway first served each model: the `created` time of the
//! model list for a model whose config gives none. Recorded once, so the
//! time stays put across restarts (and config reloads).

use super::{Store, StoreError};
use redb::{ReadableTable, TableDefinition};
use std::collections::HashMap;

/// Model name → Unix seconds it was first served.
pub(crate) const MODELS_SEEN: TableDefinition<&str, i64> =
    TableDefinition::new("models_first_seen");

impl Store {
    /// The first time each of `names` was served; those never seen before
    /// are recorded as first seen `now`.
    pub async fn first_seen(
        &self,
        names: Vec<String>,
        now: i64,
    ) -> Result<HashMap<String, i64>, StoreError> {
        self.write(move |txn| {
            let mut seen = txn.open_table(MODELS_SEEN)?;
            let mut out = HashMap::with_capacity(names.len());
            for name in names {
                let known = seen.get(name.as_str())?.map(|v| v.value());
                let at = match known {
                    Some(at) => at,
                    None => {
                        seen.insert(name.as_str(), now)?;
                        now
                    }
                };
                out.insert(name, at);
            }
            Ok(out)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_model_keeps_the_time_it_was_first_seen() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db.redb")).unwrap();
        let first = store.first_seen(vec!["a".into()], 100).await.unwrap();
        assert_eq!(first["a"], 100);
        let later = store
            .first_seen(vec!["a".into(), "b".into()], 500)
            .await
            .unwrap();
        assert_eq!((later["a"], later["b"]), (100, 500));
    }
}
