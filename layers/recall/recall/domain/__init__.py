"""Pure rules and models: no boto3, no keys, no I/O."""
