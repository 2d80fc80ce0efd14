"""The bottom layer: the words every other layer speaks, and the infrastructure under them.

The vocabulary tool authors import (`errors`, `content`, `context`, `principal`, `asking`, `chain`,
`requests`), and what every layer runs on (`conf`, `db`, `outage`, `shared_cache`, `process_cache`, `rates`,
and `ssrf_guard` for outbound connections).
It imports nothing else of this package; `asking` is the one module here that speaks the SDK's types.
"""
