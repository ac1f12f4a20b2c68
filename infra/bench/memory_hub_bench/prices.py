"""Every list price the bench uses, in one place: USD, AWS us-east-1 (N. Virginia), on-demand,
no free tier, each with where it is published and when it was checked. A price the bench could not
confirm says so (``VERIFIED`` False) and the report marks it.

Checked on 2026-12-04 against the pages below (found with the project's search tool: the AWS
pages themselves, or reports quoting them where the page was not stored)."""

from __future__ import annotations

from dataclasses import dataclass

CHECKED = "2026-12-04"
S3_PAGE = "https://aws.amazon.com/s3/pricing/"


@dataclass(frozen=True)
class Price:
    usd: float
    per: str
    source: str
    verified: bool = True


# ---------------------------------------------------------------- AWS

DYNAMODB_WRITE = Price(0.625, "million write request units", "https://aws.amazon.com/dynamodb/pricing/on-demand/")
DYNAMODB_READ = Price(0.125, "million read request units", "https://aws.amazon.com/dynamodb/pricing/on-demand/")
DYNAMODB_STORAGE = Price(0.25, "GB-month", "https://aws.amazon.com/dynamodb/pricing/on-demand/")
S3_PUT_CLASS = Price(0.005, "1,000 PUT, COPY, POST, LIST requests", S3_PAGE)
S3_GET_CLASS = Price(0.0004, "1,000 GET and all other requests", S3_PAGE)
S3_VECTORS_PUT = Price(0.20, "GB of logical vector data put (at least 128 KB a PutVectors)", S3_PAGE)
S3_VECTORS_STORAGE = Price(0.06, "GB-month", S3_PAGE)
S3_VECTORS_QUERY_CALL = Price(2.50, "million QueryVectors calls", S3_PAGE)
# Data a query processes: (vector + key + filterable metadata) bytes × the index's vectors. The
# tiers as published at launch; on 2026-06-16 AWS cut this charge for indexes over 10 million
# vectors by up to 80% and the new figure was not found: larger indexes may cost less than shown.
S3_VECTORS_QUERY_TB = Price(0.004, "TB processed, first 100,000 vectors of an index", S3_PAGE, False)
S3_VECTORS_QUERY_TB_OVER = Price(0.002, "TB processed, vectors past 100,000", S3_PAGE, False)
API_GATEWAY_REST = Price(
    3.50, "million REST API calls (first 333 million)", "https://aws.amazon.com/api-gateway/pricing/"
)
LAMBDA_ARM_GB_S = Price(0.0000133334, "GB-second, arm64", "https://aws.amazon.com/lambda/pricing/")
LAMBDA_REQUEST = Price(0.20, "million requests", "https://aws.amazon.com/lambda/pricing/")
SQS_REQUEST = Price(0.40, "million standard-queue requests", "https://aws.amazon.com/sqs/pricing/", False)
TITAN_EMBED_V2 = Price(
    0.00002, "1,000 input tokens (Titan Text Embeddings V2)", "https://aws.amazon.com/bedrock/pricing/"
)
NOVA_LITE_INPUT = Price(0.00006, "1,000 input tokens (Nova Lite)", "https://aws.amazon.com/bedrock/pricing/")
NOVA_LITE_OUTPUT = Price(0.00024, "1,000 output tokens (Nova Lite)", "https://aws.amazon.com/bedrock/pricing/")
NOVA_LITE_MODEL = "amazon.nova-lite-v1:0"  # the template's FormationModel default

# ---------------------------------------------------------------- peers (managed agent memory)

AGENTCORE_EVENT = Price(0.25, "1,000 new short-term memory events", "https://aws.amazon.com/bedrock/agentcore/pricing/")
AGENTCORE_RECORD = Price(
    0.75,
    "1,000 long-term memory records a month (built-in strategies)",
    "https://aws.amazon.com/bedrock/agentcore/pricing/",
)
AGENTCORE_RETRIEVAL = Price(0.50, "1,000 memory record retrievals", "https://aws.amazon.com/bedrock/agentcore/pricing/")
ZEP_FLEX = Price(25.0, "month, Flex plan: 20,000 credits", "https://www.getzep.com/pricing", False)
MEM0_PRO = Price(249.0, "month, Pro plan", "https://mem0.ai/pricing", False)
