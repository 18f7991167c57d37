"""DynamoDB access: one module per table, the only code that knows keys or calls DynamoDB."""
