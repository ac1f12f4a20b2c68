"""The local stack: Memory Hub's template served on a laptop, functions run as Lambda runs them,
over an emulated AWS side (moto, held to AWS's limits and to each function's IAM policy)."""
