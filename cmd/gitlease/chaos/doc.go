// Package chaos holds gitlease's chaos tests; it has no code of its own.
//
// The tests drive the real `gitlease serve` binary, built from this module,
// as a subprocess against PostgreSQL and the strict fake GitHub of
// app/githubtest, and break things underneath it:
//
//   - TestKillServeUnderLoad kills serve with SIGKILL at random moments
//     while signed issue deliveries arrive, restarts it each time, and then
//     checks that nothing was lost or doubled: every delivery answered 2xx is
//     recorded, every item is completed exactly once (recovered by the
//     sweeper where a dead instance held it), and every issue has exactly one
//     branch, one draft pull request and one concluded check run on GitHub.
//   - TestPostgresRestartUnderLoad stops and restarts a PostgreSQL cluster
//     the test owns under serve: webhook deliveries answer 503 and /readyz is
//     503 while it is down, both recover without restarting serve, and
//     nothing is lost.
//   - TestFailover runs two serve on a primary with a synchronous standby
//     (made with pg_basebackup through db/pgcluster), one naming the
//     primary first with target_session_attrs=read-write, one the standby
//     first without, kills the primary with SIGKILL under load, promotes
//     the standby and brings the old primary back as a standby: only 503s
//     during the switch, 2xx again within 5 s without a restart, every
//     delivery acked before the kill on the new primary, nothing doubled.
//   - TestFailoverAsynchronous does the same with an asynchronous standby
//     whose replication is stalled before the kill, and counts the acked
//     deliveries lost (/readyz said durability "local").
//   - TestStandbyAlone runs serve on a standby only: /readyz 503 and
//     deliveries 503 until it is promoted.
//   - TestGitHubFaults runs one workload against a healthy fake GitHub and
//     against one failing 30% of calls and rate-limiting, and requires the
//     same final state.
//
// The short versions run in `make test`. GITLEASE_CHAOS_LONG=1 selects the
// long ones (`make chaos`). GITLEASE_CHAOS_SEED=n repeats a run's random
// choices (each test logs its seed); GITLEASE_CHAOS_LOGS=dir keeps the
// serve logs there. See docs/chaos.md.
package chaos
