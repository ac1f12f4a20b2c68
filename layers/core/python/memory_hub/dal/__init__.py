"""Data access: the only code that talks to boto3 / PynamoDB."""
