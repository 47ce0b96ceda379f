// The workload image of the real-node tests (scripts/provision-node): a static HTTP server.
module local.invalid/echo

go 1.24
