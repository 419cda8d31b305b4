//! An idle cluster is quiet (issue 28, defect 1). A released session lease is announced to
//! every instance; before, each one that heard it took the session's lease without looking
//! for work, found none, released it and announced again — a loop between instances that
//! only races ended, drawing a fencing token each time. Now a lease is taken only when the
//! session has journaled events to answer, so after the last turn no instance draws a token.

#[path = "support/cluster.rs"]
mod cluster_support;
mod support;

use std::time::Duration;

use cluster_support::{ClusterRig, WAIT};

/// Longer than the other cluster tests' leases: an instance lease lapsing on a loaded
/// machine would draw a token too, and this test is about session leases.
const LEASE_SECONDS: f64 = 5.0;

/// How long the cluster is watched for a lease taken without traffic (the window).
const QUIET_WINDOW: Duration = Duration::from_secs(10);

const TOKENS_DRAWN: &str = "SELECT last_value FROM hermesd_lease_tokens";
const SESSION_LEASES_HELD: &str =
    "SELECT count(*) FROM hermesd_leases WHERE scope = 'session' AND expires_at > now()";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_the_last_turn_no_instance_takes_a_lease() {
    let rig = ClusterRig::start(2, LEASE_SECONDS).await;
    // One chat's messages through both instances: each turn ends with a release that both
    // instances hear.
    assert_eq!(rig.post(0, 1, "first").await, 200);
    rig.wait_sent(1).await;
    assert_eq!(rig.post(1, 2, "second").await, 200);
    let sent = rig.wait_sent(2).await;
    assert_eq!(sent.len(), 2, "{sent:#?}");
    // From the last reply on there is no traffic: whatever token is drawn from here on
    // is a lease taken for no work (the last turn's own lease was drawn before its reply).
    let before = rig.count(TOKENS_DRAWN).await;

    // The last turn's lease is released (bounded wait on the database's own view).
    let deadline = tokio::time::Instant::now() + WAIT;
    while rig.count(SESSION_LEASES_HELD).await > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "a session lease is still held long after the last turn: {:#?}",
            rig.all_logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Watching for the property itself (nothing happens over a window), not waiting for an
    // event: the release was announced to both instances, and neither may answer it with a
    // lease.
    tokio::time::sleep(QUIET_WINDOW).await;
    let after = rig.count(TOKENS_DRAWN).await;
    assert_eq!(
        before,
        after,
        "{} fencing token(s) drawn by an idle cluster after its last reply",
        after - before
    );
    assert_eq!(rig.sent().len(), 2, "nothing more was sent");
    rig.stop().await;
}
