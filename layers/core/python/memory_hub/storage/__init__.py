"""Storage: the only code that imports boto3, botocore or PynamoDB.

Modules here speak in the domain's terms (a message, a scene entry, an audit event) and hide how
they are kept: key layout (``layout``), typed PynamoDB models bound to their tables from the
settings on first use (``models``), transactions whose actions have names (``transactions``), S3
objects (``blobs``), and one retry policy (``retry``). Nothing here imports ``domain`` or ``edge``.
"""
