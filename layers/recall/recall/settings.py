"""Every tunable number of Recall, parsed once from the environment at cold start."""

from __future__ import annotations

from functools import lru_cache
import os
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, field_validator, model_validator


class Settings(BaseModel):
    """Defaults are the seeds' numbers; each field is overridden by its UPPER_CASE env var.

    Keyword arguments win over the environment, so tests can pin any value. A plain model
    that reads the environment itself: pydantic-settings cost every function's import
    about 20 ms (its command-line source, python-dotenv, argparse) for this one lookup."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    projects_table: str = "recall-projects"
    conversations_table: str = "recall-conversations"
    messages_table: str = "recall-messages"
    sessions_table: str = "recall-sessions"
    memories_table: str = "recall-memories"
    idempotency_table: str = "recall-idempotency"
    imports_table: str = "recall-imports"
    usage_table: str = "recall-usage"

    # Projects
    project_name_max_chars: int = 120
    project_context_max_attributes: int = 20
    project_context_value_max_chars: int = 500
    projects_page_max: int = 100
    # Members of one project, owners included: GET …/members and an owner's GET …/usage
    # answer every one of them at once, and Lambda answers at most 6 MB (6,291,456 bytes).
    # The worst member, an id of 1,016 bytes of control characters (each one \u0001 in
    # the body, escaped once more in Lambda's payload: 7 bytes), with the highest budget
    # and a usage row of 16-digit numbers and every model, is about 7.7 KB of an owner's
    # usage answer: 500 of them are 3.8 MB, 61% of it (test_members_cap.py measures it).
    members_max: int = 500

    # Usage and budgets: counters are kept this long after their day or month ends. The
    # highest budget an owner may set, per limit (tokens or turns).
    usage_kept_days: int = 400
    budget_max: int = 1_000_000_000_000

    # Presets (NextChat's masks): per project, each with ordered context prompts and
    # settings. A thread keeps a copy of its preset's, so they bound the thread item too.
    presets_max: int = 20
    preset_name_max_chars: int = 80
    context_prompts_max: int = 8
    context_prompt_max_chars: int = 2_000
    # The highest maxTokens and windowMessages a project, preset or thread may set.
    model_max_tokens_limit: int = 8_192
    window_messages_max: int = 100

    # Conversations and messages
    conversations_page_default: int = 50
    conversations_page_max: int = 100
    messages_page_default: int = 50
    messages_page_max: int = 200
    # A memory entry's history, read a page at a time: every change appends a record.
    memory_history_page_default: int = 100
    memory_history_page_max: int = 200
    # A page of messages stops at this many bytes (DynamoDB's own query page is 1 MB), so a
    # page of long messages stays a small response however many are asked for.
    messages_page_max_bytes: int = 1_000_000
    title_max_chars: int = 80
    message_max_chars: int = 16_000
    delete_batch_size: int = 25

    # Active context
    window_messages: int = 20
    # Older messages leave the window this many at a time (it holds window_messages to
    # window_messages + window_evict_step), so its start, and the cached prompt prefix up to
    # it, stays put for several turns. 0 slides the window every turn.
    window_evict_step: int = 10
    # The window's messages, by DynamoDB's size rules: bounds the prompt and what a turn
    # reads of its thread.
    window_max_bytes: int = 300_000
    # The newest messages a turn reads for its window (one query, beside its other reads):
    # a full window (window_messages + window_evict_step) of turns that each had a tool
    # round, which the window leaves out (as it does failed replies).
    window_page_messages: int = 45
    # A message the model made (the reply, a tool round), as ASCII JSON: bounds its item,
    # its place in the window and the idempotency record that keeps the reply.
    model_message_max_bytes: int = 60_000
    nudge_threshold_turns: int = 120
    # A member's session in a project starts with a turn after this long without one, and
    # ends when this long passes with no turn. The prune-sessions job ends it only once its
    # last turn is older than the idle time and the grace, the longest a turn takes from
    # its read to its save, so a turn never counts into a session the job ended; a turn in
    # between starts the next session and ends this one itself.
    session_idle_seconds: int = 86_400
    session_end_grace_seconds: int = 900
    sessions_page_default: int = 20
    sessions_page_max: int = 100
    # An ended session gives extraction its turn for at most this many of its threads that
    # hold user messages with preference signals no extraction has read (newest first).
    session_extract_max_threads: int = 10
    turn_retry_max: int = 8
    turn_retry_base_seconds: float = 0.05
    turn_memory_changes_max: int = 10
    tool_rounds_max: int = 4
    # Threads that send a turn's independent reads at once (the batch, the window's query
    # and both memory queries): one round trip before the model.
    turn_read_concurrency: int = 4

    # Memory
    memory_cap: int = 50
    memory_value_max_chars: int = 500
    extract_min_messages: int = 6
    extract_cooldown_seconds: int = 14_400
    extract_min_confidence: float = 0.6
    extract_max_new: int = 8
    consolidate_min_seconds: int = 86_400
    consolidate_min_sessions: int = 3
    consolidate_min_memories: int = 5
    thread_memory_cap: int = 50
    memory_write_attempts: int = 5
    memory_ttl_grace_hours: int = 48
    # How far ahead an expiresAt may be: ten years is "never" for a prompt rule, and a
    # bound keeps the TTL arithmetic far from datetime's year 9999.
    memory_expiry_max_days: int = 3_650

    # Background work
    memory_jobs_queue_url: str = ""
    job_queue_timeout_seconds: int = 2
    job_queue_max_attempts: int = 2
    extract_recent_messages: int = 20
    # What an extraction request shows the model of those messages: each one's text cut to
    # EXTRACT_MESSAGE_MAX_CHARS (its start and its end), and the newest that fit in
    # EXTRACT_TRANSCRIPT_MAX_CHARS, so imported replies of 60,000 characters cannot make a
    # request larger than the model's context.
    extract_message_max_chars: int = 8_000
    extract_transcript_max_chars: int = 100_000
    consolidate_min_value_chars: int = 12
    consolidate_prune_confidence: float = 0.6
    summary_max_chars: int = 2_000
    summary_point_max_chars: int = 300
    summary_max_tokens: int = 800
    summary_fold_max_messages: int = 200
    # A worker starts a batch's next job only with at least this many seconds of its
    # invocation left: one job's worst case, its one model call through every attempt
    # (MODEL_MAX_ATTEMPTS x MODEL_READ_TIMEOUT_SECONDS). The jobs not started go back to the
    # queue as new messages. The first job always starts: the worker's Timeout (120 s)
    # exceeds this reserve.
    worker_job_reserve_seconds: int = 100
    # What one summary request shows the model: each message's text cut to
    # SUMMARY_MESSAGE_MAX_CHARS (its start and its end), and the oldest messages that fit in
    # SUMMARY_FOLD_MAX_CHARS, about 25,000 tokens of English, well inside a 200k-token
    # context. The fold covers those, and the job queues the thread's next fold for the rest.
    summary_message_max_chars: int = 8_000
    summary_fold_max_chars: int = 100_000
    # Scheduled jobs read the due buckets of this many past hours: the hourly jobs catch up
    # on a few missed runs, and DynamoDB's TTL is the backstop for anything older.
    maintenance_lookback_hours: int = 6
    # make dev runs the schedules every this many seconds.
    local_schedule_seconds: int = 60
    # make dev keeps its tables in this folder (relative to the checkout; empty keeps
    # nothing), written at most this many seconds after a write.
    local_data_dir: str = ".local-data"
    local_snapshot_seconds: float = 2.0
    # Origins (scheme://host[:port]) whose pages may call make dev's API, like the template's
    # CorsAllowedOrigins: none by default, so only the console make dev serves itself.
    cors_allowed_origins: tuple[str, ...] = ()

    # Model
    model_provider: Literal["offline", "bedrock"] = "offline"
    offline_model_id: str = "recall-offline"
    # Current-generation models through US cross-region inference profiles (``us.`` ids):
    # the newer models are offered only that way. Equal to template.yaml's defaults.
    bedrock_model_id: str = "us.anthropic.claude-haiku-4-5-20251001-v1:0"
    allowed_model_ids: tuple[str, ...] = (
        "us.anthropic.claude-haiku-4-5-20251001-v1:0",
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        "us.amazon.nova-pro-v1:0",
    )
    json_protocol_model_prefixes: tuple[str, ...] = (
        "meta.llama",
        "us.meta.llama",
        "mistral.mistral-7b",
    )
    # Bedrock models (ids or inference profile ids, a geography and a dot before the model
    # id) that take prompt cache points: those with prompt caching on Bedrock.
    prompt_cache_model_prefixes: tuple[str, ...] = (
        "anthropic.claude-3-5-haiku-20241022",
        "anthropic.claude-3-7-sonnet",
        "anthropic.claude-sonnet-4",
        "anthropic.claude-opus-4",
        "anthropic.claude-haiku-4-5",
        "amazon.nova-micro",
        "amazon.nova-lite",
        "amazon.nova-pro",
        "amazon.nova-premier",
    )
    model_max_tokens: int = 1024
    model_temperature: float = 0.3
    # Attempts in all, the first included: the client's for background jobs, a turn's
    # own (backing off from MODEL_RETRY_BASE_SECONDS) within its time.
    model_max_attempts: int = 4
    model_retry_base_seconds: float = 0.5
    model_read_timeout_seconds: int = 25
    model_connect_timeout_seconds: int = 3
    # An HTTP turn's model calls, every round and retry, end within this many seconds of
    # its request, so it saves and answers inside API Gateway's 30 s; past it the turn
    # saves the error and answers 504. Every turn also keeps TURN_SAVE_RESERVE_SECONDS of
    # its function's time for the save.
    chat_model_seconds: int = 24
    turn_save_reserve_seconds: int = 5

    # Store and maintenance
    due_shards: int = 8
    dynamodb_max_attempts: int = 4
    member_change_attempts: int = 3
    # A thread's PATCH read again and applied again when the thread changed under it.
    thread_change_attempts: int = 4
    # Unprocessed batch items are retried with bounded exponential backoff and jitter.
    batch_retry_attempts: int = 8
    batch_retry_base_seconds: float = 0.05

    # HTTP
    request_body_max_bytes: int = 262_144
    # The Retry-After of a 429, a 503 and a 409 for a keyed turn still running: long enough
    # for botocore's jittered retries to have spread out, short for a person waiting.
    retry_after_seconds: int = 2

    # Export and import. An export is one JSON response, and Lambda answers at most 6 MB
    # (6,291,456 bytes) to API Gateway: above EXPORT_MAX_BYTES, counted as the UTF-8 answer
    # Lambda carries, it becomes a link to JSON Lines instead (below), never a cut document.
    # An import document is the request body, under the same 6 MB (API Gateway's own limit
    # is 10 MB) and at least EXPORT_MAX_BYTES, so an inline export imports back; it is
    # checked whole, then written by the worker in chunks of at most IMPORT_CHUNK_MAX_BYTES
    # of UTF-8 (each one DynamoDB item, under 400 KB).
    export_max_bytes: int = 5_500_000
    # Above EXPORT_MAX_BYTES the export is JSON Lines in the exports bucket instead, streamed
    # there as a multipart upload in parts of EXPORT_PART_BYTES (S3: at least 5 MiB but the
    # last, at most 10,000), and answered with a pre-signed GET URL valid this many seconds
    # (signed with the function's temporary credentials, it may stop sooner if they do).
    # An export is written within one request, and API Gateway waits 30 s for it: over
    # EXPORT_LINES_MAX_BYTES it stops with a 413 rather than run out of time.
    exports_bucket: str = ""
    export_part_bytes: int = 5_242_880
    export_link_seconds: int = 900
    export_lines_max_bytes: int = 50_000_000
    import_max_bytes: int = 5_500_000
    import_threads_max: int = 1_000
    import_messages_per_thread_max: int = 1_000
    import_chunk_max_bytes: int = 300_000
    # An import's progress and chunks are kept this long, then DynamoDB's TTL drops them.
    import_ttl_days: int = 7
    # An import whose progress has not moved this long had its chunk's job dead-lettered
    # (the queue's 720 s visibility times 3 receives is 36 minutes): the same document sent
    # again takes it up from its next chunk.
    import_stall_seconds: int = 3600

    # Idempotency
    idempotency_ttl_seconds: int = 3600

    # Erasure (DELETE …/me and DELETE /projects/{projectId}): items one invocation deletes
    # at most before it hands the rest to the worker, so an erasure never runs past a
    # Lambda timeout (25 items a batch, a few dozen batches a second).
    erase_items_per_run: int = 1_000
    # A request that looks for what to delete rather than deleting it (a Query of a table
    # that may hold nothing, an S3 listing, a marker's delete) is charged against that
    # budget as this many items, so the budget bounds a run's requests, not only its
    # deletes: a member with no data is 8 such requests (48 items: a run visits at most 21
    # of them, about 170 requests), a thread 4 (24). 1,000 items in batches of 25 are about
    # 40 requests and their queries.
    erase_request_items: int = 6

    # Streamed replies (the WebSocket API). The first text goes out at once; later text
    # waits until this many characters or this many seconds have gathered, so a reply is a
    # few dozen posts to API Gateway, not one per model chunk.
    stream_delta_min_chars: int = 120
    stream_delta_max_seconds: float = 0.2
    # The function that runs a streamed turn, invoked asynchronously (template: its name).
    stream_function_name: str = ""
    # The WebSocket $connect authorizer: the HTTP API's issuer and audiences (aud or
    # client_id, comma-separated), and how long a container keeps the issuer's keys.
    jwt_issuer: str = ""
    jwt_audience: tuple[str, ...] = ()
    jwks_cache_seconds: int = 300
    # How long the authorizer waits on the issuer's JWKS endpoint (each connect and read of
    # a fetch; an unknown kid may fetch twice). Well inside WsAuthorizerFunction's 10 s
    # Timeout, so an issuer that hangs refuses the connect (401) rather than time it out
    # (API Gateway's 500); PyJWT's own default is 30 s.
    jwks_fetch_timeout_seconds: float = 2.0
    # The offline model's pause between streamed chunks: 0 streams at once; make dev can
    # slow it to watch a reply arrive (and tests, to leave one mid-way).
    offline_stream_chunk_seconds: float = 0.0

    @model_validator(mode="before")
    @classmethod
    def _from_the_environment(cls, values: Any) -> Any:
        """Each field not given takes its environment variable, matched without regard to
        case as pydantic-settings did; tuples are comma-separated text, not JSON."""
        if not isinstance(values, dict):
            return values
        environment = {name.lower(): value for name, value in os.environ.items()}
        found = {name: environment[name] for name in cls.model_fields if name in environment}
        return {**found, **values}

    @field_validator(
        "allowed_model_ids",
        "json_protocol_model_prefixes",
        "prompt_cache_model_prefixes",
        "jwt_audience",
        "cors_allowed_origins",
        mode="before",
    )
    @classmethod
    def _split_commas(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    @model_validator(mode="after")
    def _an_inline_export_imports_back(self) -> Settings:
        """An export answered inline is at most EXPORT_MAX_BYTES as sent, and an import
        body at most IMPORT_MAX_BYTES: the first must fit the second to import back."""
        if self.export_max_bytes > self.import_max_bytes:
            raise ValueError("EXPORT_MAX_BYTES must not exceed IMPORT_MAX_BYTES")
        return self

    @model_validator(mode="after")
    def _a_message_fits_its_transcript(self) -> Settings:
        """A request always carries at least one message, cut to its bound: that bound must
        fit the budget of the whole transcript, or the budget would not hold."""
        if self.summary_message_max_chars > self.summary_fold_max_chars:
            raise ValueError("SUMMARY_MESSAGE_MAX_CHARS must not exceed SUMMARY_FOLD_MAX_CHARS")
        if self.extract_message_max_chars > self.extract_transcript_max_chars:
            raise ValueError(
                "EXTRACT_MESSAGE_MAX_CHARS must not exceed EXTRACT_TRANSCRIPT_MAX_CHARS"
            )
        return self

    @property
    def default_model_id(self) -> str:
        return self.offline_model_id if self.model_provider == "offline" else self.bedrock_model_id


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """Read once per process: Lambda's environment does not change after cold start."""
    return Settings()
