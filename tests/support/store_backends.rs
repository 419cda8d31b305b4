//! One store test suite, run against both backends: a test written once as
//! `async fn name(t: &TestStore)` and listed in [`on_both_backends!`] runs on a fresh state.db
//! and on a fresh private PostgreSQL cluster (`support::postgres`).

use hermesd::state::{Store, StoreOptions};

use super::postgres::PgCluster;

/// Which backend a test store lives on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// A store on a fresh database, with what keeps that database alive (a temp dir, a cluster).
pub struct TestStore {
    pub store: Store,
    pub backend: Backend,
    /// Where a SQLite store's file lives (also a scratch dir for PostgreSQL tests).
    pub dir: tempfile::TempDir,
    pub cluster: Option<PgCluster>,
}

impl TestStore {
    pub async fn open(backend: Backend) -> Self {
        Self::open_with(backend, StoreOptions::default()).await
    }

    pub async fn open_with(backend: Backend, options: StoreOptions) -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let cluster = (backend == Backend::Postgres).then(PgCluster::start);
        let store = open_on(&dir, cluster.as_ref(), options).await;
        Self {
            store,
            backend,
            dir,
            cluster,
        }
    }

    /// Another handle on the same database, as a second process (or instance) would open it.
    pub async fn another(&self, options: StoreOptions) -> Store {
        open_on(&self.dir, self.cluster.as_ref(), options).await
    }
}

async fn open_on(
    dir: &tempfile::TempDir,
    cluster: Option<&PgCluster>,
    options: StoreOptions,
) -> Store {
    match cluster {
        None => Store::open_with(&dir.path().join("state.db"), options).expect("open state.db"),
        Some(cluster) => Store::open_postgres(&cluster.url(), options)
            .await
            .expect("open the PostgreSQL store"),
    }
}

/// Runs each listed `async fn name(t: &TestStore)` once per backend, as the tests
/// `name::sqlite` and `name::postgres`.
#[macro_export]
macro_rules! on_both_backends {
    ($($name:ident),+ $(,)?) => {
        $(
            mod $name {
                use super::support::store_backends::{Backend, TestStore};

                #[tokio::test(flavor = "multi_thread")]
                async fn sqlite() {
                    let test = TestStore::open(Backend::Sqlite).await;
                    super::$name(&test).await;
                }

                #[tokio::test(flavor = "multi_thread")]
                async fn postgres() {
                    let test = TestStore::open(Backend::Postgres).await;
                    super::$name(&test).await;
                }
            }
        )+
    };
}
