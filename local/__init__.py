"""Running Recall on one machine: the embedded DynamoDB (moto's server) with tables made
from ``template.yaml``, the HTTP server that turns requests into API Gateway events, and
an in-process invoker like ``sam local invoke``. Local use only."""
