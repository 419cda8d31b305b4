//! What one turn costs PostgreSQL (issue 28, "Cost per turn"), counted by a wire proxy in
//! front of one real instance (`support::pg_proxy`): the round trips of a chat turn (a
//! Telegram webhook update answered by the model, no tools) and of an HTTP API turn, printed
//! statement by statement; that a chat turn costs the same round trips, and reads about the
//! same bytes, with 10 and with 2,000 other sessions' rows in every table it touches; and
//! that the turn's hot statements are planned on an index, not a scan of those rows.
//!
//! What is not the turn's is left out of its count: the lease is long (600 s, renewed every
//! 200 s), so no renewal falls inside a turn; the two statements the instance runs on its
//! own clock every second ([`BACKGROUND`]) are counted apart; and a pooled connection's
//! ping (`sync`: sqlx checks each connection as it goes back to the pool, off the caller's
//! path) is counted apart too, as are first-use prepares (`parse:`, once per connection
//! and statement).

#[path = "support/cluster.rs"]
mod cluster_support;
mod support;

use cluster_support::{ClusterRig, WAIT};
use sqlx::postgres::PgPool;
use support::conditions::wait_until;
use support::pg_proxy::{Batch, PgProxy};

/// Long: the instance and session leases are renewed every third of it, so no renewal
/// falls inside a measured turn.
const LEASE_SECONDS: f64 = 600.0;

/// The statements an idle instance runs every second: the sweep's look at every unfinished
/// event (`ORDER BY seq` without a session) and the cron scheduler's look at `jobs.json`'s
/// version.
const BACKGROUND: [&str; 2] = [
    "WHERE state IN ('received', 'processing') ORDER BY seq",
    "SELECT version FROM hermesd_shared_files WHERE name = $1",
];

/// The last statements of a chat turn: the session lease given back and the reply marked
/// delivered (in either order: the reply is sent on a lane of its own).
const CHAT_TURN_ENDS: [&str; 2] = [
    "UPDATE hermesd_leases SET expires_at = now()",
    "SET state = 'delivered'",
];

/// The last statement of an API turn: the session lease given back.
const API_TURN_ENDS: [&str; 1] = ["UPDATE hermesd_leases SET expires_at = now()"];

/// The ceiling this test holds a chat turn's statement round trips to: the 21 a turn makes
/// (listed in docs/cluster.md, "Cost per turn") and the notification race's 2.
const CHAT_TURN_BOUND: usize = 23;

/// The same for an API turn: the 12 it makes and the race's 2.
const API_TURN_BOUND: usize = 14;

/// How many round trips two identical chat turns may differ by (see the scale test).
const NOTIFICATION_RACE: usize = 2;

/// One turn's traffic, split as the module docs say.
#[derive(Debug)]
struct TurnCost {
    /// Round trips that ran the turn's statements.
    statements: usize,
    /// Round trips that only prepared a statement on a connection new to it.
    prepares: usize,
    /// Bare `Sync`s: sqlx's pool checks.
    pings: usize,
    /// Round trips of [`BACKGROUND`] statements in the turn's window.
    background: usize,
    /// Bytes of the answers to the turn's statements.
    answer_bytes: u64,
    lines: Vec<String>,
}

fn is_background(batch: &Batch) -> bool {
    BACKGROUND.iter().any(|b| batch.sql.contains(b))
}

fn cost_of(batches: &[Batch]) -> TurnCost {
    let mut cost = TurnCost {
        statements: 0,
        prepares: 0,
        pings: 0,
        background: 0,
        answer_bytes: 0,
        lines: Vec::new(),
    };
    for batch in batches {
        if batch.sql == "sync" {
            cost.pings += 1;
        } else if is_background(batch) {
            cost.background += 1;
        } else if batch.sql.starts_with("parse: ") {
            cost.prepares += 1;
        } else {
            cost.statements += 1;
            cost.answer_bytes += batch.answer_bytes;
            let short: String = batch.sql.split_whitespace().collect::<Vec<_>>().join(" ");
            cost.lines.push(format!(
                "{:6} B  {}",
                batch.answer_bytes,
                short.chars().take(160).collect::<String>()
            ));
        }
    }
    cost
}

fn print_cost(label: &str, cost: &TurnCost) {
    eprintln!(
        "== {label}: {} statement round trips ({} answer bytes), {} prepares, {} pool pings, \
         {} background",
        cost.statements, cost.answer_bytes, cost.prepares, cost.pings, cost.background
    );
    for (n, line) in cost.lines.iter().enumerate() {
        eprintln!("{n:3} {line}");
    }
}

/// Runs `turn`, waits until every statement in `ends` has run and two background rounds
/// ran after the last of them (the turn's trailing work is done by then), and returns what
/// the proxy saw from the start to that point.
async fn measure(
    proxy: &PgProxy,
    ends: &[&str],
    turn: impl std::future::Future<Output = ()>,
) -> TurnCost {
    let from = proxy.batch_log().len();
    turn.await;
    let mut upto = 0;
    wait_until("the turn's last statements ran", WAIT, || {
        let log = proxy.batch_log();
        let window = &log[from..];
        let last = ends
            .iter()
            .map(|end| window.iter().rposition(|b| b.sql.contains(end)))
            .collect::<Option<Vec<usize>>>();
        let Some(last) = last.and_then(|l| l.into_iter().max()) else {
            return false;
        };
        let after: Vec<usize> = window
            .iter()
            .enumerate()
            .skip(last + 1)
            .filter(|(_, b)| b.sql.contains(BACKGROUND[0]))
            .map(|(i, _)| i)
            .collect();
        match after.get(1) {
            Some(&second) => {
                upto = from + second + 1;
                true
            }
            None => false,
        }
    })
    .await;
    cost_of(&proxy.batch_log()[from..upto])
}

/// A chat turn: update `update_id` posted to the instance, answered.
async fn chat_turn(rig: &ClusterRig, update_id: i64) -> TurnCost {
    let before = rig.sent().len();
    measure(rig.proxy(0), &CHAT_TURN_ENDS, async {
        assert_eq!(
            rig.post(0, update_id, &format!("message {update_id}"))
                .await,
            200
        );
        rig.wait_sent(before + 1).await;
    })
    .await
}

/// Column names of `table` but `left_out`, in order.
async fn columns(pool: &PgPool, table: &str, left_out: &str) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT column_name::text FROM information_schema.columns \
         WHERE table_name = $1 AND column_name <> $2 AND is_generated = 'NEVER' \
           AND identity_generation IS NULL ORDER BY ordinal_position",
    )
    .bind(table)
    .bind(left_out)
    .fetch_all(pool)
    .await
    .expect("read the columns")
}

/// Other sessions numbered `from..=to`, each a copy of the user's session in every table a
/// turn touches: its routing entry, session row and messages, answered journal rows, a
/// delivered reply, an expired lease; and one unfinished journal row on a platform this
/// instance does not serve (left for an instance that does).
async fn seed_other_sessions(rig: &ClusterRig, from: i64, to: i64) {
    let pool = PgPool::connect(&rig.pg.url()).await.expect("connect");
    let key: String = sqlx::query_scalar("SELECT session_key FROM gateway_routing LIMIT 1")
        .fetch_one(&pool)
        .await
        .expect("the user's routing entry");
    let session: String = sqlx::query_scalar("SELECT id FROM sessions LIMIT 1")
        .fetch_one(&pool)
        .await
        .expect("the user's session");
    let session_columns = columns(&pool, "sessions", "").await;
    let copied_session: Vec<String> = session_columns
        .iter()
        .map(|c| match c.as_str() {
            "id" => "'other-' || g".to_owned(),
            "title" => "NULL".to_owned(),
            other => other.to_owned(),
        })
        .collect();
    let message_columns = columns(&pool, "messages", "id").await;
    let copied_message: Vec<String> = message_columns
        .iter()
        .map(|c| match c.as_str() {
            "session_id" => "'other-' || g".to_owned(),
            other => other.to_owned(),
        })
        .collect();
    let statements = [
        "INSERT INTO gateway_routing (scope, session_key, entry_json, updated_at) \
         SELECT scope, 'other:' || g, entry_json, updated_at \
         FROM gateway_routing, generate_series($1::bigint, $2::bigint) g WHERE session_key = $3"
            .to_owned(),
        format!(
            "INSERT INTO sessions ({}) SELECT {} FROM sessions, \
             generate_series($1::bigint, $2::bigint) g WHERE id = $4 AND $3 <> ''",
            session_columns.join(", "),
            copied_session.join(", ")
        ),
        format!(
            "INSERT INTO messages ({}) SELECT {} FROM messages, \
             generate_series($1::bigint, $2::bigint) g WHERE session_id = $4 AND $3 <> ''",
            message_columns.join(", "),
            copied_message.join(", ")
        ),
        "INSERT INTO hermesd_inbound_events (platform, event_id, session_key, state, \
             payload_json, received_at, updated_at, reply_obligation_id) \
         SELECT platform, event_id || '-other-' || g, 'other:' || g, state, payload_json, \
             received_at, updated_at, reply_obligation_id \
         FROM hermesd_inbound_events, generate_series($1::bigint, $2::bigint) g \
         WHERE session_key = $3 AND $4 <> ''"
            .to_owned(),
        "INSERT INTO hermesd_inbound_events (platform, event_id, session_key, state, \
             payload_json, received_at, updated_at) \
         SELECT 'slack', 'waiting-' || g, 'other:' || g, 'received', payload_json, \
             received_at, updated_at \
         FROM (SELECT payload_json, received_at, updated_at FROM hermesd_inbound_events \
               WHERE session_key = $3 AND $4 <> '' LIMIT 1) one, \
              generate_series($1::bigint, $2::bigint) g"
            .to_owned(),
        "INSERT INTO delivery_obligations (obligation_id, session_key, platform, chat_id, \
             thread_id, content, state, attempts, created_at, updated_at) \
         SELECT obligation_id || '-other-' || g, 'other:' || g, platform, chat_id, thread_id, \
             content, state, attempts, created_at, updated_at \
         FROM delivery_obligations, generate_series($1::bigint, $2::bigint) g \
         WHERE session_key = $3 AND $4 <> ''"
            .to_owned(),
        "INSERT INTO hermesd_leases (scope, key, holder, token, acquired_at, expires_at) \
         SELECT 'session', 'other:' || g, 'gone-' || $3 || $4, \
             nextval('hermesd_lease_tokens'), now() - interval '2 hours', \
             now() - interval '1 hour' \
         FROM generate_series($1::bigint, $2::bigint) g"
            .to_owned(),
    ];
    for sql in statements {
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(from)
            .bind(to)
            .bind(&key)
            .bind(&session)
            .execute(&pool)
            .await
            .expect("copy the user's session");
    }
    sqlx::raw_sql("ANALYZE")
        .execute(&pool)
        .await
        .expect("analyze");
    pool.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_trips_of_a_chat_turn_and_an_api_turn() {
    let rig = ClusterRig::start_proxied(1, LEASE_SECONDS, "").await;
    // First turns warm the pool and its connections' prepared statements.
    for update_id in 1..=3 {
        chat_turn(&rig, update_id).await;
    }
    let chat = chat_turn(&rig, 4).await;
    print_cost("chat turn (Telegram webhook)", &chat);
    let proxy = rig.proxy(0);
    for _ in 0..3 {
        measure(proxy, &API_TURN_ENDS, async {
            rig.api_chat(0, "conversation-1", "warm up").await;
        })
        .await;
    }
    let api = measure(proxy, &API_TURN_ENDS, async {
        rig.api_chat(0, "conversation-1", "hello").await;
    })
    .await;
    print_cost("API turn (/v1/chat/completions)", &api);
    assert!(chat.statements <= CHAT_TURN_BOUND, "{chat:#?}");
    // A text-only turn keeps no images, so it has none to forget either.
    assert!(
        !chat
            .lines
            .iter()
            .any(|l| l.contains("hermesd_shared_files")),
        "{chat:#?}"
    );
    assert!(api.statements <= API_TURN_BOUND, "{api:#?}");
    assert!(api.statements < chat.statements, "{api:#?}");
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chat_turn_costs_the_same_with_10_and_with_2000_other_sessions() {
    let rig = ClusterRig::start_proxied(1, LEASE_SECONDS, "").await;
    for update_id in 1..=3 {
        chat_turn(&rig, update_id).await;
    }
    seed_other_sessions(&rig, 1, 10).await;
    chat_turn(&rig, 4).await;
    let few = chat_turn(&rig, 5).await;
    print_cost("chat turn, 10 other sessions", &few);
    seed_other_sessions(&rig, 11, 2000).await;
    chat_turn(&rig, 6).await;
    let many = chat_turn(&rig, 7).await;
    print_cost("chat turn, 2000 other sessions", &many);
    // The same statements, but for one race: the notification of the turn's own event may
    // reach the instance before its worker took the lease (one more has-work check) or
    // after (one more look at the session's journal), so two turns can differ by
    // NOTIFICATION_RACE round trips whatever the tables hold.
    assert!(
        many.statements.abs_diff(few.statements) <= NOTIFICATION_RACE,
        "{few:#?}\n{many:#?}"
    );
    assert!(many.statements <= CHAT_TURN_BOUND, "{many:#?}");
    // The session's own history grows by two messages a turn (the user's and the reply,
    // well under 1 KiB here), and the race above may read the unfinished event once more
    // (under 1 KiB); every other session's rows would add hundreds of kilobytes.
    assert!(
        many.answer_bytes < few.answer_bytes + 4096,
        "the turn read {} bytes with 10 other sessions and {} with 2000\n{few:#?}\n{many:#?}",
        few.answer_bytes,
        many.answer_bytes
    );
    rig.stop().await;
}

/// A hot statement of the turn path, with the parameter types `PREPARE` needs and the
/// index its plan must use.
struct Hot {
    what: &'static str,
    types: &'static str,
    sql: &'static str,
    index: &'static str,
    /// Whether a turn sends it (the renewal runs every third of the lease, on its own).
    in_turn: bool,
}

/// The statements every turn runs, as the instance sends them (the test checks each one
/// appears in a real turn's traffic first).
const HOT: [Hot; 7] = [
    Hot {
        what: "the session's routing entry",
        types: "text, text",
        sql: "SELECT entry_json FROM gateway_routing WHERE scope = $1 AND session_key = $2",
        index: "gateway_routing_pkey",
        in_turn: true,
    },
    Hot {
        what: "the session's unfinished journal rows",
        types: "text",
        sql: "SELECT platform, event_id, session_key, state, payload_json, received_at, \
              updated_at, reply_obligation_id FROM hermesd_inbound_events \
              WHERE state IN ('received', 'processing') AND session_key = $1 ORDER BY seq",
        index: "hermesd_idx_inbound_unfinished_session",
        in_turn: true,
    },
    Hot {
        what: "whether the session has unfinished journal rows",
        types: "text",
        sql: "SELECT EXISTS (SELECT 1 FROM hermesd_inbound_events \
              WHERE state IN ('received', 'processing') AND session_key = $1) AS found",
        index: "hermesd_idx_inbound_unfinished_session",
        in_turn: true,
    },
    Hot {
        what: "the lease acquire",
        types: "text, text, text, float8",
        sql: "INSERT INTO hermesd_leases AS l (scope, key, holder, token, acquired_at, expires_at) \
              VALUES ($1, $2, $3, nextval('hermesd_lease_tokens'), now(), \
                      now() + $4 * interval '1 millisecond') \
              ON CONFLICT (scope, key) DO UPDATE",
        index: "hermesd_leases_pkey",
        in_turn: true,
    },
    Hot {
        what: "the lease renewal",
        types: "text, text, bigint, float8, boolean",
        sql: "UPDATE hermesd_leases SET expires_at = now() + $4 * interval '1 millisecond' \
              WHERE scope = $1 AND key = $2 AND token = $3 AND ($5 OR expires_at > now())",
        index: "hermesd_leases_pkey",
        in_turn: false,
    },
    Hot {
        what: "a fenced one-statement write (the routing entry saved under the lease)",
        types: "text, text, text, float8, text, text, bigint",
        sql: "WITH fence AS MATERIALIZED ( SELECT 1 FROM hermesd_leases \
              WHERE scope = $5 AND key = $6 AND token = $7 AND expires_at > now() FOR SHARE), \
              w AS (INSERT INTO gateway_routing",
        index: "hermesd_leases_pkey",
        in_turn: true,
    },
    Hot {
        what: "the fence check of a transaction's write",
        types: "text, text, bigint, text",
        sql: "SELECT set_config('idle_in_transaction_session_timeout', $4, true) \
              FROM hermesd_leases \
              WHERE scope = $1 AND key = $2 AND token = $3 AND expires_at > now() FOR SHARE",
        index: "hermesd_leases_pkey",
        in_turn: true,
    },
];

/// The session's history, as the turn loads it: the messages of one session id.
const HISTORY_INDEX: &str = "idx_messages_session_id";

fn squeeze(sql: &str) -> String {
    sql.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hot_statements_of_a_turn_are_planned_on_an_index() {
    let rig = ClusterRig::start_proxied(1, LEASE_SECONDS, "").await;
    // The second turn loads the history the first one wrote.
    chat_turn(&rig, 1).await;
    chat_turn(&rig, 2).await;
    let seen: Vec<String> = rig
        .proxy(0)
        .batch_log()
        .iter()
        .map(|b| squeeze(&b.sql))
        .collect();
    seed_other_sessions(&rig, 1, 2000).await;
    let history = seen
        .iter()
        .find(|sql| sql.contains("FROM messages m WHERE m.session_id = $1"))
        .expect("the turn loads the session's history")
        .trim_start_matches("parse: ")
        .to_owned();
    let pool = PgPool::connect(&rig.pg.url()).await.expect("connect");
    let mut conn = pool.acquire().await.expect("a connection");
    // A generic plan: the one a prepared statement gets whatever its parameters.
    sqlx::raw_sql("SET plan_cache_mode = force_generic_plan")
        .execute(&mut *conn)
        .await
        .unwrap();
    let mut checks: Vec<(&str, String, String, &str, bool)> = HOT
        .iter()
        .map(|h| {
            (
                h.what,
                h.types.to_owned(),
                squeeze(h.sql),
                h.index,
                h.in_turn,
            )
        })
        .collect();
    checks.push((
        "the session's history",
        "text".to_owned(),
        history,
        HISTORY_INDEX,
        true,
    ));
    for (n, (what, types, sql, index, in_turn)) in checks.into_iter().enumerate() {
        let prefix = sql.split(" ON CONFLICT").next().unwrap_or(&sql).to_owned();
        assert!(
            !in_turn || seen.iter().any(|s| s.contains(&prefix)),
            "{what}: a turn no longer sends {sql:?}"
        );
        // The acquire's and the fenced write's full text as the instance sends them.
        let sql = match sql.contains("ON CONFLICT") || sql.starts_with("WITH fence") {
            true => seen
                .iter()
                .find(|s| s.contains(&prefix))
                .unwrap()
                .trim_start_matches("parse: ")
                .to_owned(),
            false => sql,
        };
        let arity = types.split(',').count();
        let nulls = vec!["NULL"; arity].join(", ");
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "PREPARE hot{n} ({types}) AS {sql}"
        )))
        .execute(&mut *conn)
        .await
        .unwrap_or_else(|e| panic!("{what}: prepare {sql}: {e}"));
        let plan: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "EXPLAIN EXECUTE hot{n} ({nulls})"
        )))
        .fetch_all(&mut *conn)
        .await
        .unwrap_or_else(|e| panic!("{what}: explain: {e}"));
        let plan = plan.join("\n");
        eprintln!("== {what}\n{plan}");
        assert!(!plan.contains("Seq Scan"), "{what}: {plan}");
        assert!(plan.contains(index), "{what} does not use {index}: {plan}");
    }
    drop(conn);
    pool.close().await;
    rig.stop().await;
}
