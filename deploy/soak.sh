#!/usr/bin/env bash
# Soak and fault test of the release binary (benches/soak.rs): Telegram, Discord and Slack
# fakes plus the HTTP API under steady load, faults every few seconds, kill -9 + restart
# every few minutes (faults include a Telegram flood-wait of 20-90 s on one chat); prints
# "N lost, N duplicated, N abandoned" and one JSON report (also target/bench-soak.json),
# daemon logs in target/soak/. Exits non-zero when a target is missed.
#
#   deploy/soak.sh                     # 10 minutes (the default)
#   deploy/soak.sh --minutes 60        # longer
#   deploy/soak.sh --seconds 100       # the CI size
#   deploy/soak.sh --seed 42           # replay a seed printed by an earlier run
#
# Other options: --users N (per platform, default 12), --fault-every-secs S (default 4),
# --kill-every-secs S (default 180), --seed-db-mb N (start on a state.db already holding
# N MiB of conversations). HERMESD_BENCH_DIR moves the home off /dev/shm. With
# --features heap-stats (cargo bench --features heap-stats --bench soak -- ...) the
# report splits the memory into the Rust heap and the rest.
set -euo pipefail
cd "$(dirname "$0")/.."
exec cargo bench --bench soak -- "$@"
