"""The benchmark suite: our demo server against a bare SDK server, under wrk (see bench/README.md)."""
