"""The emulated AWS side of the local stack: moto, held to AWS's rules, with what moto lacks
(S3 Vectors' QueryVectors, the Bedrock runtime)."""
