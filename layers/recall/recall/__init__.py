"""Recall: saved conversations, a working context window and durable memory.

Dependencies point one way. Handlers (``functions/*/app.py``) parse events and call
``services``; services orchestrate use cases over ``domain`` (pure rules and models, no
boto3, no keys) and ``store`` (one module per table, the only code that builds keys or
calls DynamoDB). Model providers live in ``providers`` behind ``domain.prompt``'s small
interface. ``api`` holds the HTTP edge: request and response models, identity and the
single place where domain errors become status codes.
"""
