//! The one place a statement run straight on a pool is run again when the pooled connection
//! it was given turns out to have broken while it sat idle.
//!
//! The store's pool hands connections out without pinging them first (that ping cost a round
//! trip per statement; see [`super::connect_for_store`]). A connection closed while idle (a
//! server restart, a dropped socket, the server ending an idle session) is then found broken
//! by the first statement sent on it. [`Retried`] is the executor every such statement goes
//! through: when the first attempt fails that way before any row came back, it runs the
//! statement once more on a connection that has just answered a ping. Only statements that
//! may run twice go through it: reads, and writes whose second run changes nothing the first
//! did not (a lease release or renewal, a notification, an upsert of the same values). A
//! write that must not run twice goes through a transaction instead, whose `BEGIN` is the
//! statement that meets the broken connection ([`super::PgStore::begin`]).

use futures_util::future::BoxFuture;
use futures_util::stream::BoxStream;
use futures_util::{FutureExt, StreamExt};
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgArguments, PgPool, PgQueryResult, PgRow, PgStatement, PgTypeInfo};
use sqlx::{Connection, Either, Execute, Executor, Postgres, SqlStr};

use super::error::connection_broke;

/// `pool` as an executor whose statements are run once more on a live connection when the
/// first connection they got had broken while idle.
pub fn retried(pool: &PgPool) -> Retried<'_> {
    Retried(pool)
}

/// See [`retried`].
#[derive(Debug, Clone, Copy)]
pub struct Retried<'p>(&'p PgPool);

/// What one statement answered: row counts and rows, in order.
type Answers = Vec<Either<PgQueryResult, PgRow>>;

/// How much of its answer a caller wants.
#[derive(Clone, Copy)]
enum Wanted {
    Everything,
    FirstRow,
}

/// One statement, kept so that it can be sent twice.
struct Statement {
    sql: SqlStr,
    arguments: Option<PgArguments>,
}

impl Statement {
    fn take<'q>(mut query: impl Execute<'q, Postgres>) -> Result<Self, sqlx::Error> {
        let arguments = query.take_arguments().map_err(sqlx::Error::Encode)?;
        Ok(Self {
            sql: query.sql(),
            arguments,
        })
    }

    async fn run_on(
        &self,
        conn: &mut PoolConnection<Postgres>,
        wanted: Wanted,
    ) -> Result<Answers, sqlx::Error> {
        let query = (self.sql.clone(), self.arguments.clone());
        match wanted {
            Wanted::FirstRow => Ok(conn
                .fetch_optional(query)
                .await?
                .map(Either::Right)
                .into_iter()
                .collect()),
            Wanted::Everything => {
                let mut answers = Vec::new();
                let mut stream = conn.fetch_many(query);
                while let Some(answer) = stream.next().await {
                    answers.push(answer?);
                }
                Ok(answers)
            }
        }
    }

    /// Runs the statement on a pooled connection, and once more on a live one if the first
    /// had broken while idle.
    async fn run(&self, pool: &PgPool, wanted: Wanted) -> Result<Answers, sqlx::Error> {
        let mut conn = pool.acquire().await?;
        match self.run_on(&mut conn, wanted).await {
            Err(error) if connection_broke(&error) => {
                tracing::debug!(%error, "a pooled connection broke while idle; running the statement again");
                // The pool closes it: its ping on the way back fails.
                drop(conn);
                let mut conn = live_connection(pool).await?;
                self.run_on(&mut conn, wanted).await
            }
            other => other,
        }
    }
}

/// A pooled connection that has just answered a ping. Connections that do not are closed,
/// as many as the pool can hold (after a server restart every idle one is broken).
pub(super) async fn live_connection(
    pool: &PgPool,
) -> Result<PoolConnection<Postgres>, sqlx::Error> {
    let mut left = pool.options().get_max_connections();
    loop {
        let mut conn = pool.acquire().await?;
        match conn.ping().await {
            Ok(()) => return Ok(conn),
            Err(error) if left > 0 && connection_broke(&error) => {
                left -= 1;
                // Gone from the pool at once, so the pool may open a new one in its place.
                drop(conn.detach());
            }
            Err(error) => return Err(error),
        }
    }
}

impl<'p> Executor<'p> for Retried<'_> {
    type Database = Postgres;

    fn fetch_many<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> BoxStream<'e, Result<Either<PgQueryResult, PgRow>, sqlx::Error>>
    where
        'p: 'e,
        E: 'q + Execute<'q, Postgres>,
    {
        let pool = self.0.clone();
        let statement = Statement::take(query);
        let answers = async move { statement?.run(&pool, Wanted::Everything).await };
        futures_util::stream::once(answers)
            .flat_map(|answers| {
                let items: Vec<Result<_, sqlx::Error>> = match answers {
                    Ok(answers) => answers.into_iter().map(Ok).collect(),
                    Err(error) => vec![Err(error)],
                };
                futures_util::stream::iter(items)
            })
            .boxed()
    }

    fn fetch_optional<'e, 'q: 'e, E>(
        self,
        query: E,
    ) -> BoxFuture<'e, Result<Option<PgRow>, sqlx::Error>>
    where
        'p: 'e,
        E: 'q + Execute<'q, Postgres>,
    {
        let pool = self.0.clone();
        let statement = Statement::take(query);
        async move {
            let answers = statement?.run(&pool, Wanted::FirstRow).await?;
            Ok(answers.into_iter().find_map(Either::right))
        }
        .boxed()
    }

    fn prepare_with<'e>(
        self,
        sql: SqlStr,
        parameters: &'e [PgTypeInfo],
    ) -> BoxFuture<'e, Result<PgStatement, sqlx::Error>>
    where
        'p: 'e,
    {
        let pool = self.0.clone();
        async move { pool.prepare_with(sql, parameters).await }.boxed()
    }

    fn describe<'e>(
        self,
        sql: SqlStr,
    ) -> BoxFuture<'e, Result<sqlx::Describe<Postgres>, sqlx::Error>>
    where
        'p: 'e,
    {
        let pool = self.0.clone();
        async move { pool.describe(sql).await }.boxed()
    }
}
