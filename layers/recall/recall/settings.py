"""Every tunable number of Recall, parsed once from the environment at cold start."""

from __future__ import annotations

from functools import lru_cache
import os
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, field_validator, model_validator


class Settings(BaseModel):
    """Defaults are the seeds' numbers; each field is overridden by its UPPER_CASE env var.

    Keyword arguments win over the environment, so tests can pin any value. A plain model
    that reads the environment itself: pydantic-settings would add about 20 ms to every
    function's import (its command-line source, python-dotenv, argparse) for this lookup."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # Table names. The Projects table: projects, members, presets and erasure markers.
    projects_table: str = "recall-projects"
    # The Conversations table: one item per thread, the one truth about it.
    conversations_table: str = "recall-conversations"
    # The Messages table: every message of every thread.
    messages_table: str = "recall-messages"
    # The Sessions table: each member's periods of activity in a project.
    sessions_table: str = "recall-sessions"
    # The Memories table: memory entries, their history and each user's META item.
    memories_table: str = "recall-memories"
    # The Idempotency table: the records of keyed chat turns.
    idempotency_table: str = "recall-idempotency"
    # The Imports table: each import's progress and chunks.
    imports_table: str = "recall-imports"
    # The Usage table: what members and background jobs spend on the model.
    usage_table: str = "recall-usage"

    # Projects. A project's name, at most this many characters.
    project_name_max_chars: int = 120
    # Context attributes one project holds (type, currency…), read into every prompt.
    project_context_max_attributes: int = 20
    # A context attribute's text value, at most this many characters.
    project_context_value_max_chars: int = 500
    # Projects a page of GET /projects lists, by default and at most.
    projects_page_max: int = 100
    # Members of one project, owners included, all in one answer of GET …/members and an
    # owner's GET …/usage under Lambda's 6 MB: the worst member (a 1,016-byte id of control
    # characters, 7 bytes each escaped twice, the highest budget, a 16-digit usage row for
    # every model) is about 7.7 KB, so 500 are 3.8 MB, 61% of it (test_members_cap.py).
    members_max: int = 500

    # Usage and budgets. Usage counters and ended sessions are kept this many days after they end.
    usage_kept_days: int = 400
    # The highest budget an owner may set a member, per limit (tokens or turns).
    budget_max: int = 1_000_000_000_000

    # Presets (NextChat's masks). Presets one project holds, each context prompts and settings.
    presets_max: int = 20
    # A preset's name, at most this many characters.
    preset_name_max_chars: int = 80
    # Context prompts one preset holds (a thread keeps a copy, so they bound its item too).
    context_prompts_max: int = 8
    # One context prompt's text, at most this many characters.
    context_prompt_max_chars: int = 2_000
    # The highest maxTokens a project, preset or thread may set.
    model_max_tokens_limit: int = 8_192
    # The highest windowMessages a project, preset or thread may set.
    window_messages_max: int = 100

    # Conversations and messages. Threads a page of GET …/conversations lists by default
    # (the seed's 50 most recent).
    conversations_page_default: int = 50
    # The most threads a page of GET …/conversations may ask for.
    conversations_page_max: int = 100
    # Messages a page of GET …/conversations/{conversationId} lists by default.
    messages_page_default: int = 50
    # The most messages a page of GET …/conversations/{conversationId} may ask for.
    messages_page_max: int = 200
    # Records a page of GET …/memories/{key}/history lists by default (one per change).
    memory_history_page_default: int = 100
    # The most records a page of GET …/memories/{key}/history may ask for.
    memory_history_page_max: int = 200
    # A page of messages stops at this many bytes (DynamoDB's own query page is 1 MB), so a
    # page of long messages stays a small response however many are asked for.
    messages_page_max_bytes: int = 1_000_000
    # A thread's title, at most this many characters (a new one's is cut from its first message).
    title_max_chars: int = 80
    # A message a user sends or imports, at most this many characters.
    message_max_chars: int = 16_000
    # Items one BatchWriteItem deletes (DynamoDB's limit is 25).
    delete_batch_size: int = 25

    # Active context. Messages in a thread's window (the seed's 20), unless a project,
    # preset or thread sets windowMessages.
    window_messages: int = 20
    # Older messages leave the window this many at a time, so its start, and the cached
    # prompt prefix up to it, stays put for several turns. 0 slides it every turn.
    window_evict_step: int = 10
    # The window's messages, by DynamoDB's size rules: bounds the prompt and what a turn
    # reads of its thread.
    window_max_bytes: int = 300_000
    # The newest messages a turn reads for its window (one query): a full window
    # (window_messages + window_evict_step) of turns that each had a tool round.
    window_page_messages: int = 45
    # A message the model made (the reply, a tool round), as ASCII JSON: bounds its item,
    # its place in the window and the idempotency record that keeps the reply.
    model_message_max_bytes: int = 60_000
    # A reply's nudge.show turns true past this many turns on the thread (the seed's 120).
    nudge_threshold_turns: int = 120
    # A member's session starts with a turn after this long without one, and ends when this
    # long passes with no turn (the seed prunes sessions after 24 h idle).
    session_idle_seconds: int = 86_400
    # The prune-sessions job ends a session only once its last turn is older than the idle
    # time plus this, the longest a turn takes from its read to its save.
    session_end_grace_seconds: int = 900
    # Sessions a page of GET …/sessions lists by default.
    sessions_page_default: int = 20
    # The most sessions a page of GET …/sessions may ask for.
    sessions_page_max: int = 100
    # An ended session gives extraction its turn for at most this many of its threads with
    # unread preference signals (newest first).
    session_extract_max_threads: int = 10
    # Attempts at a turn's save when another write to its thread got there first.
    turn_retry_max: int = 8
    # The first backoff between those attempts, in seconds (full jitter, doubling, at most
    # 1 s); a thread's PATCH backs off from it too.
    turn_retry_base_seconds: float = 0.05
    # Memory entries one turn's tools may save or forget, each entry counted once.
    turn_memory_changes_max: int = 10
    # Tool rounds the model may take in one turn; the call after the last offers no tools.
    tool_rounds_max: int = 4
    # Threads that send a turn's independent reads at once (the batch, the window's query
    # and both memory queries): one round trip before the model.
    turn_read_concurrency: int = 4

    # Memory. Persistent entries per user and project (the seed's 50); consolidation keeps it.
    memory_cap: int = 50
    # A memory entry's value, at most this many characters.
    memory_value_max_chars: int = 500
    # Extraction reads a thread only once it holds this many user and assistant messages
    # (the seed's 6).
    extract_min_messages: int = 6
    # Extraction runs at most once in this many seconds per user and project (the seed's 4 h).
    extract_cooldown_seconds: int = 14_400
    # An extracted entry below this confidence (0 to 1) is not written (the seed's 0.6).
    extract_min_confidence: float = 0.6
    # Entries one extraction run adds or updates at most (the seed's 8).
    extract_max_new: int = 8
    # Consolidation runs only this many seconds after the last one (the seed's 24 h).
    consolidate_min_seconds: int = 86_400
    # Consolidation runs only after this many sessions since the last one (the seed's 3).
    consolidate_min_sessions: int = 3
    # Consolidation runs only over this many active persistent entries (the seed's 5).
    consolidate_min_memories: int = 5
    # Thread-scoped memory entries one thread holds.
    thread_memory_cap: int = 50
    # Attempts at one entry's write, or a META update, when another writer got there first.
    memory_write_attempts: int = 5
    # An expiring entry's TTL, this many hours after expiresAt: the backstop of the
    # expire-memories job.
    memory_ttl_grace_hours: int = 48
    # How far ahead an expiresAt may be: ten years is "never" for a prompt rule, and a
    # bound keeps the TTL arithmetic far from datetime's year 9999.
    memory_expiry_max_days: int = 3_650

    # Background work. The memory jobs queue (SQS) for the worker; the template sets it.
    memory_jobs_queue_url: str = ""
    # The SQS client's connect and read timeouts, in seconds: a turn queues its jobs after
    # its save and waits no longer than it must.
    job_queue_timeout_seconds: int = 2
    # Attempts in all of one SQS request, the first included.
    job_queue_max_attempts: int = 2
    # Messages an extraction reads: the thread's newest since the clear-context marker.
    extract_recent_messages: int = 20
    # Each message an extraction request shows the model, cut to this many characters.
    extract_message_max_chars: int = 8_000
    # An extraction request's messages in all, in characters (the newest that fit), so
    # long imported replies cannot make it larger than the model's context.
    extract_transcript_max_chars: int = 100_000
    # Consolidation prunes a background entry whose value is under this many characters.
    consolidate_min_value_chars: int = 12
    # Consolidation prunes an extracted entry below this confidence (0 to 1).
    consolidate_prune_confidence: float = 0.6
    # A thread's rolling summary, at most this many characters.
    summary_max_chars: int = 2_000
    # One point of the summary, at most this many characters, so one long sentence cannot
    # push the others out.
    summary_point_max_chars: int = 300
    # The model's reply to one summary request, at most this many tokens.
    summary_max_tokens: int = 800
    # Messages one summary run reads at most; the job queues the next fold for the rest.
    summary_fold_max_messages: int = 200
    # A worker starts a batch's next job only with this many seconds left: one job's worst
    # case (MODEL_MAX_ATTEMPTS x MODEL_READ_TIMEOUT_SECONDS), within its 120 s Timeout.
    worker_job_reserve_seconds: int = 100
    # Each message a summary request shows the model, cut to this many characters.
    summary_message_max_chars: int = 8_000
    # A summary request's messages in all, in characters (the oldest that fit): about
    # 25,000 tokens of English, well inside a 200k-token context.
    summary_fold_max_chars: int = 100_000
    # Scheduled jobs read the due buckets of this many past hours: the hourly jobs catch up
    # on a few missed runs, and DynamoDB's TTL is the backstop for anything older.
    maintenance_lookback_hours: int = 6

    # Model. What answers turns and jobs: offline calls no model (the template sets it).
    model_provider: Literal["offline", "bedrock"] = "offline"
    # The default model's id when MODEL_PROVIDER is offline.
    offline_model_id: str = "recall-offline"
    # The default model on Bedrock: a US cross-region inference profile (``us.`` id), the
    # only way the newer models are offered; template.yaml's default too.
    bedrock_model_id: str = "us.anthropic.claude-haiku-4-5-20251001-v1:0"
    # Models a turn, project, preset or thread may name besides the default (the template's
    # default too).
    allowed_model_ids: tuple[str, ...] = (
        "us.anthropic.claude-haiku-4-5-20251001-v1:0",
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        "us.amazon.nova-pro-v1:0",
    )
    # Models (id prefixes) that cannot call tools: they get them as a JSON reply protocol.
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
    # A reply's maxTokens unless a project, preset or thread sets one; an extraction's too.
    model_max_tokens: int = 1024
    # A reply's temperature (0 to 1) unless a project, preset or thread sets one.
    model_temperature: float = 0.3
    # Attempts in all, the first included: the client's for background jobs, a turn's
    # own (backing off from MODEL_RETRY_BASE_SECONDS) within its time.
    model_max_attempts: int = 4
    # The first backoff between a turn's model attempts, in seconds (full jitter, doubling).
    model_retry_base_seconds: float = 0.5
    # The Bedrock client's read timeout, in seconds; a turn's call gets less if less is left.
    model_read_timeout_seconds: int = 25
    # The Bedrock client's connect timeout, in seconds; a turn's gets less if less is left.
    model_connect_timeout_seconds: int = 3
    # An HTTP turn's model calls, every round and retry, end within this many seconds, so
    # it saves and answers inside API Gateway's 30 s; past it the turn answers 504.
    chat_model_seconds: int = 24
    # Seconds of its function's time every turn keeps for its save.
    turn_save_reserve_seconds: int = 5

    # Store and maintenance. Each hour's due items spread over this many byDue partitions.
    due_shards: int = 8
    # Attempts in all, the first included, of each DynamoDB and S3 request.
    dynamodb_max_attempts: int = 4
    # Attempts at a member change when another change to the members got there first.
    member_change_attempts: int = 3
    # Attempts at a thread's PATCH, read and applied again when the thread changed under it.
    thread_change_attempts: int = 4
    # Attempts at a batch's unprocessed items (bounded exponential backoff and jitter).
    batch_retry_attempts: int = 8
    # The first backoff between those attempts, in seconds; member changes and memory
    # writes back off from it too.
    batch_retry_base_seconds: float = 0.05

    # HTTP. A request body or WebSocket frame, at most this many bytes; an import has its own.
    request_body_max_bytes: int = 262_144
    # The Retry-After of a 429, a 503 and a 409 for a keyed turn still running: long enough
    # for botocore's jittered retries to have spread out, short for a person waiting.
    retry_after_seconds: int = 2

    # Export and import. An inline export, at most this many bytes of UTF-8 as Lambda sends
    # it (Lambda answers 6 MB at most); a larger one goes to the exports bucket as JSON Lines.
    export_max_bytes: int = 5_500_000
    # The S3 bucket that holds larger exports as JSON Lines (the template sets it).
    exports_bucket: str = ""
    # A large export's multipart upload parts, in bytes (S3: at least 5 MiB, 10,000 parts).
    export_part_bytes: int = 5_242_880
    # A large export's pre-signed GET URL is valid this many seconds (or until the
    # function's temporary credentials it was signed with expire).
    export_link_seconds: int = 900
    # A large export, at most this many bytes: one request writes it within API Gateway's
    # 30 s, and stops with a 413 past it.
    export_lines_max_bytes: int = 50_000_000
    # An import body, at most this many bytes as the event carries it: under Lambda's 6 MB
    # and at least EXPORT_MAX_BYTES, so an inline export imports back.
    import_max_bytes: int = 5_500_000
    # Threads one import document holds.
    import_threads_max: int = 1_000
    # Messages one imported thread holds.
    import_messages_per_thread_max: int = 1_000
    # The chunks the worker writes an import in, at most this many bytes of UTF-8 (each one
    # DynamoDB item, under its 400 KB).
    import_chunk_max_bytes: int = 300_000
    # An import's progress and chunks are kept this long, then DynamoDB's TTL drops them.
    import_ttl_days: int = 7
    # An import whose progress has not moved this long had its chunk's job dead-lettered
    # (720 s visibility times 3 receives is 36 minutes); sent again, it resumes.
    import_stall_seconds: int = 3600

    # Idempotency. A keyed turn's record is kept this many seconds: the same key replays it.
    idempotency_ttl_seconds: int = 3600

    # Erasure (DELETE …/me and DELETE /projects/{projectId}): items one invocation deletes
    # before it hands the rest to the worker, so it never runs past a Lambda timeout.
    erase_items_per_run: int = 1_000
    # Items a request that only looks for what to delete (a Query, an S3 listing) counts
    # as, so that budget bounds a run's requests too (about 170 at most).
    erase_request_items: int = 6

    # Streamed replies (the WebSocket API). The first text goes out at once, later text once
    # this many characters have gathered: a few dozen posts a reply, not one a chunk.
    stream_delta_min_chars: int = 120
    # Later text also goes out once its oldest part has waited this many seconds.
    stream_delta_max_seconds: float = 0.2
    # The function that runs a streamed turn, invoked asynchronously (template: its name).
    stream_function_name: str = ""
    # The issuer (iss) the WebSocket $connect authorizer accepts: the HTTP API's.
    jwt_issuer: str = ""
    # The audiences (aud or client_id) that authorizer accepts: the HTTP API's.
    jwt_audience: tuple[str, ...] = ()
    # How long a container keeps the issuer's signing keys, in seconds.
    jwks_cache_seconds: int = 300
    # How long the authorizer waits on each connect and read of the issuer's JWKS, in seconds:
    # well inside its 10 s Timeout, so a hung issuer refuses the connect (401), not a 500.
    jwks_fetch_timeout_seconds: float = 2.0
    # The offline model's pause between streamed chunks: 0 streams at once; make dev can
    # slow it to watch a reply arrive (and tests, to leave one mid-way).
    offline_stream_chunk_seconds: float = 0.0

    # Local server (make dev). Seconds between make dev's runs of the schedules; 0 runs none.
    local_schedule_seconds: int = 60
    # The folder make dev keeps its tables in, relative to the checkout; empty keeps none.
    local_data_dir: str = ".local-data"
    # make dev writes its tables to LOCAL_DATA_DIR at most this many seconds after a write.
    local_snapshot_seconds: float = 2.0
    # Origins (scheme://host[:port]) whose pages may call make dev's API, like the template's
    # CorsAllowedOrigins: none by default, so only the console make dev serves itself.
    cors_allowed_origins: tuple[str, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _from_the_environment(cls, values: Any) -> Any:
        """Each field not given takes its environment variable, matched without regard to
        case; tuples are comma-separated text, not JSON."""
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
