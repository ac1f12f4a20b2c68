"""The benchmark: latency, AWS calls and round trips per route, scale, throughput, cold starts."""
