import datetime

from google.api import field_behavior_pb2 as _field_behavior_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Job(_message.Message):
    __slots__ = ("id", "number", "project", "idempotency_key", "requested_by", "base_model", "revision", "dataset", "objective", "adaptation", "hyperparameters", "protect", "evaluation", "resources", "output", "retention", "status", "planned_steps", "steps_per_epoch", "effective_batch_size", "train_examples", "eval_examples", "preparation", "progress", "outcome", "timing", "model_available", "result", "failure_code", "failure_category", "failure_message", "attempt_count", "chats", "chat_count", "message_count", "chats_truncated", "deleted", "create_time", "update_time", "artifacts", "cost_micro_cents", "holding", "cost_credits", "queue", "key_id")
    ID_FIELD_NUMBER: _ClassVar[int]
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    PROJECT_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_BY_FIELD_NUMBER: _ClassVar[int]
    BASE_MODEL_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    DATASET_FIELD_NUMBER: _ClassVar[int]
    OBJECTIVE_FIELD_NUMBER: _ClassVar[int]
    ADAPTATION_FIELD_NUMBER: _ClassVar[int]
    HYPERPARAMETERS_FIELD_NUMBER: _ClassVar[int]
    PROTECT_FIELD_NUMBER: _ClassVar[int]
    EVALUATION_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    RETENTION_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    PLANNED_STEPS_FIELD_NUMBER: _ClassVar[int]
    STEPS_PER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    EFFECTIVE_BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    TRAIN_EXAMPLES_FIELD_NUMBER: _ClassVar[int]
    EVAL_EXAMPLES_FIELD_NUMBER: _ClassVar[int]
    PREPARATION_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    TIMING_FIELD_NUMBER: _ClassVar[int]
    MODEL_AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    FAILURE_CODE_FIELD_NUMBER: _ClassVar[int]
    FAILURE_CATEGORY_FIELD_NUMBER: _ClassVar[int]
    FAILURE_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_COUNT_FIELD_NUMBER: _ClassVar[int]
    CHATS_FIELD_NUMBER: _ClassVar[int]
    CHAT_COUNT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    CHATS_TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    ARTIFACTS_FIELD_NUMBER: _ClassVar[int]
    COST_MICRO_CENTS_FIELD_NUMBER: _ClassVar[int]
    HOLDING_FIELD_NUMBER: _ClassVar[int]
    FROM_FIELD_NUMBER: _ClassVar[int]
    COST_CREDITS_FIELD_NUMBER: _ClassVar[int]
    QUEUE_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    number: int
    project: str
    idempotency_key: str
    requested_by: str
    base_model: str
    revision: str
    dataset: Dataset
    objective: Objective
    adaptation: Adaptation
    hyperparameters: Hyperparameters
    protect: Protection
    evaluation: Evaluation
    resources: Resources
    output: Output
    retention: Retention
    status: str
    planned_steps: int
    steps_per_epoch: int
    effective_batch_size: int
    train_examples: int
    eval_examples: int
    preparation: Preparation
    progress: Progress
    outcome: Outcome
    timing: Timing
    model_available: bool
    result: Result
    failure_code: str
    failure_category: str
    failure_message: str
    attempt_count: int
    chats: _containers.RepeatedCompositeFieldContainer[DatasetItem]
    chat_count: int
    message_count: int
    chats_truncated: bool
    deleted: bool
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    artifacts: _containers.RepeatedCompositeFieldContainer[JobArtifact]
    cost_micro_cents: int
    holding: Holding
    cost_credits: float
    queue: QueuePosition
    key_id: str
    def __init__(self, id: _Optional[str] = ..., number: _Optional[int] = ..., project: _Optional[str] = ..., idempotency_key: _Optional[str] = ..., requested_by: _Optional[str] = ..., base_model: _Optional[str] = ..., revision: _Optional[str] = ..., dataset: _Optional[_Union[Dataset, _Mapping]] = ..., objective: _Optional[_Union[Objective, _Mapping]] = ..., adaptation: _Optional[_Union[Adaptation, _Mapping]] = ..., hyperparameters: _Optional[_Union[Hyperparameters, _Mapping]] = ..., protect: _Optional[_Union[Protection, _Mapping]] = ..., evaluation: _Optional[_Union[Evaluation, _Mapping]] = ..., resources: _Optional[_Union[Resources, _Mapping]] = ..., output: _Optional[_Union[Output, _Mapping]] = ..., retention: _Optional[_Union[Retention, _Mapping]] = ..., status: _Optional[str] = ..., planned_steps: _Optional[int] = ..., steps_per_epoch: _Optional[int] = ..., effective_batch_size: _Optional[int] = ..., train_examples: _Optional[int] = ..., eval_examples: _Optional[int] = ..., preparation: _Optional[_Union[Preparation, _Mapping]] = ..., progress: _Optional[_Union[Progress, _Mapping]] = ..., outcome: _Optional[_Union[Outcome, _Mapping]] = ..., timing: _Optional[_Union[Timing, _Mapping]] = ..., model_available: _Optional[bool] = ..., result: _Optional[_Union[Result, _Mapping]] = ..., failure_code: _Optional[str] = ..., failure_category: _Optional[str] = ..., failure_message: _Optional[str] = ..., attempt_count: _Optional[int] = ..., chats: _Optional[_Iterable[_Union[DatasetItem, _Mapping]]] = ..., chat_count: _Optional[int] = ..., message_count: _Optional[int] = ..., chats_truncated: _Optional[bool] = ..., deleted: _Optional[bool] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., artifacts: _Optional[_Iterable[_Union[JobArtifact, _Mapping]]] = ..., cost_micro_cents: _Optional[int] = ..., holding: _Optional[_Union[Holding, _Mapping]] = ..., cost_credits: _Optional[float] = ..., queue: _Optional[_Union[QueuePosition, _Mapping]] = ..., key_id: _Optional[str] = ..., **kwargs) -> None: ...

class QueuePosition(_message.Message):
    __slots__ = ("position", "ahead", "total", "eta_seconds", "basis")
    POSITION_FIELD_NUMBER: _ClassVar[int]
    AHEAD_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    ETA_SECONDS_FIELD_NUMBER: _ClassVar[int]
    BASIS_FIELD_NUMBER: _ClassVar[int]
    position: int
    ahead: int
    total: int
    eta_seconds: float
    basis: str
    def __init__(self, position: _Optional[int] = ..., ahead: _Optional[int] = ..., total: _Optional[int] = ..., eta_seconds: _Optional[float] = ..., basis: _Optional[str] = ...) -> None: ...

class Holding(_message.Message):
    __slots__ = ("device_seconds", "micro_cents")
    DEVICE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    MICRO_CENTS_FIELD_NUMBER: _ClassVar[int]
    device_seconds: int
    micro_cents: int
    def __init__(self, device_seconds: _Optional[int] = ..., micro_cents: _Optional[int] = ...) -> None: ...

class Dataset(_message.Message):
    __slots__ = ("uri", "system_prompt", "tags", "source", "resolved_revision", "source_sha256", "splits")
    class SplitsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    URI_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_PROMPT_FIELD_NUMBER: _ClassVar[int]
    TAGS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    RESOLVED_REVISION_FIELD_NUMBER: _ClassVar[int]
    SOURCE_SHA256_FIELD_NUMBER: _ClassVar[int]
    SPLITS_FIELD_NUMBER: _ClassVar[int]
    uri: str
    system_prompt: str
    tags: _containers.RepeatedScalarFieldContainer[str]
    source: str
    resolved_revision: str
    source_sha256: str
    splits: _containers.ScalarMap[str, str]
    def __init__(self, uri: _Optional[str] = ..., system_prompt: _Optional[str] = ..., tags: _Optional[_Iterable[str]] = ..., source: _Optional[str] = ..., resolved_revision: _Optional[str] = ..., source_sha256: _Optional[str] = ..., splits: _Optional[_Mapping[str, str]] = ...) -> None: ...

class Objective(_message.Message):
    __slots__ = ("loss", "loss_mask", "terms")
    LOSS_FIELD_NUMBER: _ClassVar[int]
    LOSS_MASK_FIELD_NUMBER: _ClassVar[int]
    TERMS_FIELD_NUMBER: _ClassVar[int]
    loss: str
    loss_mask: str
    terms: _containers.RepeatedCompositeFieldContainer[ObjectiveTerm]
    def __init__(self, loss: _Optional[str] = ..., loss_mask: _Optional[str] = ..., terms: _Optional[_Iterable[_Union[ObjectiveTerm, _Mapping]]] = ...) -> None: ...

class ObjectiveTerm(_message.Message):
    __slots__ = ("kind", "weight", "margin")
    KIND_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    MARGIN_FIELD_NUMBER: _ClassVar[int]
    kind: str
    weight: float
    margin: float
    def __init__(self, kind: _Optional[str] = ..., weight: _Optional[float] = ..., margin: _Optional[float] = ...) -> None: ...

class Adaptation(_message.Message):
    __slots__ = ("mode", "rank", "alpha", "targets", "basis", "sources", "residual_rank", "chose")
    MODE_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    ALPHA_FIELD_NUMBER: _ClassVar[int]
    TARGETS_FIELD_NUMBER: _ClassVar[int]
    BASIS_FIELD_NUMBER: _ClassVar[int]
    SOURCES_FIELD_NUMBER: _ClassVar[int]
    RESIDUAL_RANK_FIELD_NUMBER: _ClassVar[int]
    CHOSE_FIELD_NUMBER: _ClassVar[int]
    mode: str
    rank: int
    alpha: int
    targets: _containers.RepeatedScalarFieldContainer[str]
    basis: str
    sources: _containers.RepeatedScalarFieldContainer[str]
    residual_rank: int
    chose: str
    def __init__(self, mode: _Optional[str] = ..., rank: _Optional[int] = ..., alpha: _Optional[int] = ..., targets: _Optional[_Iterable[str]] = ..., basis: _Optional[str] = ..., sources: _Optional[_Iterable[str]] = ..., residual_rank: _Optional[int] = ..., chose: _Optional[str] = ...) -> None: ...

class Hyperparameters(_message.Message):
    __slots__ = ("num_train_epochs", "max_steps", "learning_rate", "per_device_train_batch_size", "gradient_accumulation_steps", "warmup_steps", "max_seq_length", "early_stopping_patience", "base_load_precision", "save_steps", "seed", "weight_decay", "mixed_precision", "zero_stage", "zero_offload", "gradient_checkpointing", "lr_scheduler_type", "packing")
    NUM_TRAIN_EPOCHS_FIELD_NUMBER: _ClassVar[int]
    MAX_STEPS_FIELD_NUMBER: _ClassVar[int]
    LEARNING_RATE_FIELD_NUMBER: _ClassVar[int]
    PER_DEVICE_TRAIN_BATCH_SIZE_FIELD_NUMBER: _ClassVar[int]
    GRADIENT_ACCUMULATION_STEPS_FIELD_NUMBER: _ClassVar[int]
    WARMUP_STEPS_FIELD_NUMBER: _ClassVar[int]
    MAX_SEQ_LENGTH_FIELD_NUMBER: _ClassVar[int]
    EARLY_STOPPING_PATIENCE_FIELD_NUMBER: _ClassVar[int]
    BASE_LOAD_PRECISION_FIELD_NUMBER: _ClassVar[int]
    SAVE_STEPS_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_DECAY_FIELD_NUMBER: _ClassVar[int]
    MIXED_PRECISION_FIELD_NUMBER: _ClassVar[int]
    ZERO_STAGE_FIELD_NUMBER: _ClassVar[int]
    ZERO_OFFLOAD_FIELD_NUMBER: _ClassVar[int]
    GRADIENT_CHECKPOINTING_FIELD_NUMBER: _ClassVar[int]
    LR_SCHEDULER_TYPE_FIELD_NUMBER: _ClassVar[int]
    PACKING_FIELD_NUMBER: _ClassVar[int]
    num_train_epochs: int
    max_steps: int
    learning_rate: float
    per_device_train_batch_size: int
    gradient_accumulation_steps: int
    warmup_steps: int
    max_seq_length: int
    early_stopping_patience: int
    base_load_precision: str
    save_steps: int
    seed: int
    weight_decay: float
    mixed_precision: str
    zero_stage: int
    zero_offload: str
    gradient_checkpointing: bool
    lr_scheduler_type: str
    packing: bool
    def __init__(self, num_train_epochs: _Optional[int] = ..., max_steps: _Optional[int] = ..., learning_rate: _Optional[float] = ..., per_device_train_batch_size: _Optional[int] = ..., gradient_accumulation_steps: _Optional[int] = ..., warmup_steps: _Optional[int] = ..., max_seq_length: _Optional[int] = ..., early_stopping_patience: _Optional[int] = ..., base_load_precision: _Optional[str] = ..., save_steps: _Optional[int] = ..., seed: _Optional[int] = ..., weight_decay: _Optional[float] = ..., mixed_precision: _Optional[str] = ..., zero_stage: _Optional[int] = ..., zero_offload: _Optional[str] = ..., gradient_checkpointing: _Optional[bool] = ..., lr_scheduler_type: _Optional[str] = ..., packing: _Optional[bool] = ...) -> None: ...

class Protection(_message.Message):
    __slots__ = ("suites", "capabilities", "projection", "distillation", "budget")
    SUITES_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    PROJECTION_FIELD_NUMBER: _ClassVar[int]
    DISTILLATION_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    suites: _containers.RepeatedScalarFieldContainer[str]
    capabilities: _containers.RepeatedScalarFieldContainer[str]
    projection: Projection
    distillation: bool
    budget: RegressionBudget
    def __init__(self, suites: _Optional[_Iterable[str]] = ..., capabilities: _Optional[_Iterable[str]] = ..., projection: _Optional[_Union[Projection, _Mapping]] = ..., distillation: _Optional[bool] = ..., budget: _Optional[_Union[RegressionBudget, _Mapping]] = ...) -> None: ...

class Projection(_message.Message):
    __slots__ = ("strength",)
    STRENGTH_FIELD_NUMBER: _ClassVar[int]
    strength: float
    def __init__(self, strength: _Optional[float] = ...) -> None: ...

class RegressionBudget(_message.Message):
    __slots__ = ("accuracy", "ece")
    ACCURACY_FIELD_NUMBER: _ClassVar[int]
    ECE_FIELD_NUMBER: _ClassVar[int]
    accuracy: float
    ece: float
    def __init__(self, accuracy: _Optional[float] = ..., ece: _Optional[float] = ...) -> None: ...

class Evaluation(_message.Message):
    __slots__ = ("suites", "best_loss", "best_step", "last_loss", "last_step", "evaluations", "served_step", "promoted_before_last_eval", "verdict", "grades")
    SUITES_FIELD_NUMBER: _ClassVar[int]
    BEST_LOSS_FIELD_NUMBER: _ClassVar[int]
    BEST_STEP_FIELD_NUMBER: _ClassVar[int]
    LAST_LOSS_FIELD_NUMBER: _ClassVar[int]
    LAST_STEP_FIELD_NUMBER: _ClassVar[int]
    EVALUATIONS_FIELD_NUMBER: _ClassVar[int]
    SERVED_STEP_FIELD_NUMBER: _ClassVar[int]
    PROMOTED_BEFORE_LAST_EVAL_FIELD_NUMBER: _ClassVar[int]
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    GRADES_FIELD_NUMBER: _ClassVar[int]
    suites: _containers.RepeatedScalarFieldContainer[str]
    best_loss: float
    best_step: int
    last_loss: float
    last_step: int
    evaluations: int
    served_step: int
    promoted_before_last_eval: bool
    verdict: str
    grades: _containers.RepeatedCompositeFieldContainer[SuiteGrade]
    def __init__(self, suites: _Optional[_Iterable[str]] = ..., best_loss: _Optional[float] = ..., best_step: _Optional[int] = ..., last_loss: _Optional[float] = ..., last_step: _Optional[int] = ..., evaluations: _Optional[int] = ..., served_step: _Optional[int] = ..., promoted_before_last_eval: _Optional[bool] = ..., verdict: _Optional[str] = ..., grades: _Optional[_Iterable[_Union[SuiteGrade, _Mapping]]] = ...) -> None: ...

class SuiteGrade(_message.Message):
    __slots__ = ("suite", "role", "examples", "base", "trained", "within_budget")
    SUITE_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    EXAMPLES_FIELD_NUMBER: _ClassVar[int]
    BASE_FIELD_NUMBER: _ClassVar[int]
    TRAINED_FIELD_NUMBER: _ClassVar[int]
    WITHIN_BUDGET_FIELD_NUMBER: _ClassVar[int]
    suite: str
    role: str
    examples: int
    base: Grades
    trained: Grades
    within_budget: bool
    def __init__(self, suite: _Optional[str] = ..., role: _Optional[str] = ..., examples: _Optional[int] = ..., base: _Optional[_Union[Grades, _Mapping]] = ..., trained: _Optional[_Union[Grades, _Mapping]] = ..., within_budget: _Optional[bool] = ...) -> None: ...

class Grades(_message.Message):
    __slots__ = ("accuracy", "log_loss", "ece")
    ACCURACY_FIELD_NUMBER: _ClassVar[int]
    LOG_LOSS_FIELD_NUMBER: _ClassVar[int]
    ECE_FIELD_NUMBER: _ClassVar[int]
    accuracy: float
    log_loss: float
    ece: float
    def __init__(self, accuracy: _Optional[float] = ..., log_loss: _Optional[float] = ..., ece: _Optional[float] = ...) -> None: ...

class Resources(_message.Message):
    __slots__ = ("machines", "devices", "steps", "max_seconds", "budget")
    MACHINES_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    STEPS_FIELD_NUMBER: _ClassVar[int]
    MAX_SECONDS_FIELD_NUMBER: _ClassVar[int]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    machines: _containers.RepeatedScalarFieldContainer[str]
    devices: _containers.RepeatedScalarFieldContainer[str]
    steps: int
    max_seconds: int
    budget: int
    def __init__(self, machines: _Optional[_Iterable[str]] = ..., devices: _Optional[_Iterable[str]] = ..., steps: _Optional[int] = ..., max_seconds: _Optional[int] = ..., budget: _Optional[int] = ...) -> None: ...

class Output(_message.Message):
    __slots__ = ("kind", "name")
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    kind: str
    name: str
    def __init__(self, kind: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class Retention(_message.Message):
    __slots__ = ("policy_class", "ttl_seconds")
    POLICY_CLASS_FIELD_NUMBER: _ClassVar[int]
    TTL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    policy_class: str
    ttl_seconds: int
    def __init__(self, policy_class: _Optional[str] = ..., ttl_seconds: _Optional[int] = ...) -> None: ...

class Preparation(_message.Message):
    __slots__ = ("status", "selected_examples", "trainable_examples", "failure_code", "snapshot_time", "snapshot_sha256")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    SELECTED_EXAMPLES_FIELD_NUMBER: _ClassVar[int]
    TRAINABLE_EXAMPLES_FIELD_NUMBER: _ClassVar[int]
    FAILURE_CODE_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_TIME_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_SHA256_FIELD_NUMBER: _ClassVar[int]
    status: str
    selected_examples: int
    trainable_examples: int
    failure_code: str
    snapshot_time: _timestamp_pb2.Timestamp
    snapshot_sha256: str
    def __init__(self, status: _Optional[str] = ..., selected_examples: _Optional[int] = ..., trainable_examples: _Optional[int] = ..., failure_code: _Optional[str] = ..., snapshot_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., snapshot_sha256: _Optional[str] = ...) -> None: ...

class Progress(_message.Message):
    __slots__ = ("step", "planned_steps", "percent", "epoch", "loss", "eval_loss", "learning_rate", "tokens_per_second", "eta_seconds", "samples_per_second", "model_tflops", "mfu", "flops_per_token", "peak_tflops")
    STEP_FIELD_NUMBER: _ClassVar[int]
    PLANNED_STEPS_FIELD_NUMBER: _ClassVar[int]
    PERCENT_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    LOSS_FIELD_NUMBER: _ClassVar[int]
    EVAL_LOSS_FIELD_NUMBER: _ClassVar[int]
    LEARNING_RATE_FIELD_NUMBER: _ClassVar[int]
    TOKENS_PER_SECOND_FIELD_NUMBER: _ClassVar[int]
    ETA_SECONDS_FIELD_NUMBER: _ClassVar[int]
    SAMPLES_PER_SECOND_FIELD_NUMBER: _ClassVar[int]
    MODEL_TFLOPS_FIELD_NUMBER: _ClassVar[int]
    MFU_FIELD_NUMBER: _ClassVar[int]
    FLOPS_PER_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PEAK_TFLOPS_FIELD_NUMBER: _ClassVar[int]
    step: int
    planned_steps: int
    percent: float
    epoch: float
    loss: float
    eval_loss: float
    learning_rate: float
    tokens_per_second: float
    eta_seconds: float
    samples_per_second: float
    model_tflops: float
    mfu: float
    flops_per_token: float
    peak_tflops: float
    def __init__(self, step: _Optional[int] = ..., planned_steps: _Optional[int] = ..., percent: _Optional[float] = ..., epoch: _Optional[float] = ..., loss: _Optional[float] = ..., eval_loss: _Optional[float] = ..., learning_rate: _Optional[float] = ..., tokens_per_second: _Optional[float] = ..., eta_seconds: _Optional[float] = ..., samples_per_second: _Optional[float] = ..., model_tflops: _Optional[float] = ..., mfu: _Optional[float] = ..., flops_per_token: _Optional[float] = ..., peak_tflops: _Optional[float] = ...) -> None: ...

class Outcome(_message.Message):
    __slots__ = ("stop_reason", "downgrades")
    STOP_REASON_FIELD_NUMBER: _ClassVar[int]
    DOWNGRADES_FIELD_NUMBER: _ClassVar[int]
    stop_reason: str
    downgrades: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, stop_reason: _Optional[str] = ..., downgrades: _Optional[_Iterable[str]] = ...) -> None: ...

class Timing(_message.Message):
    __slots__ = ("total_seconds", "queued_seconds", "preparing_seconds", "training_seconds", "finalizing_seconds", "attempt_count", "metered_device_seconds", "charged_device_seconds")
    TOTAL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    QUEUED_SECONDS_FIELD_NUMBER: _ClassVar[int]
    PREPARING_SECONDS_FIELD_NUMBER: _ClassVar[int]
    TRAINING_SECONDS_FIELD_NUMBER: _ClassVar[int]
    FINALIZING_SECONDS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_COUNT_FIELD_NUMBER: _ClassVar[int]
    METERED_DEVICE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    CHARGED_DEVICE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    total_seconds: float
    queued_seconds: float
    preparing_seconds: float
    training_seconds: float
    finalizing_seconds: float
    attempt_count: int
    metered_device_seconds: int
    charged_device_seconds: int
    def __init__(self, total_seconds: _Optional[float] = ..., queued_seconds: _Optional[float] = ..., preparing_seconds: _Optional[float] = ..., training_seconds: _Optional[float] = ..., finalizing_seconds: _Optional[float] = ..., attempt_count: _Optional[int] = ..., metered_device_seconds: _Optional[int] = ..., charged_device_seconds: _Optional[int] = ...) -> None: ...

class Result(_message.Message):
    __slots__ = ("sha256", "kind", "name", "size", "base_sha256", "provenance_record_id", "step", "checkpoint_sha256", "checkpoint_step")
    SHA256_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    BASE_SHA256_FIELD_NUMBER: _ClassVar[int]
    PROVENANCE_RECORD_ID_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_SHA256_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_STEP_FIELD_NUMBER: _ClassVar[int]
    sha256: str
    kind: str
    name: str
    size: float
    base_sha256: str
    provenance_record_id: str
    step: int
    checkpoint_sha256: str
    checkpoint_step: int
    def __init__(self, sha256: _Optional[str] = ..., kind: _Optional[str] = ..., name: _Optional[str] = ..., size: _Optional[float] = ..., base_sha256: _Optional[str] = ..., provenance_record_id: _Optional[str] = ..., step: _Optional[int] = ..., checkpoint_sha256: _Optional[str] = ..., checkpoint_step: _Optional[int] = ...) -> None: ...

class JobArtifact(_message.Message):
    __slots__ = ("sha256", "kind", "name", "size")
    SHA256_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    sha256: str
    kind: str
    name: str
    size: float
    def __init__(self, sha256: _Optional[str] = ..., kind: _Optional[str] = ..., name: _Optional[str] = ..., size: _Optional[float] = ...) -> None: ...

class DatasetItem(_message.Message):
    __slots__ = ("id", "name", "message_count", "split", "messages")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    SPLIT_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    message_count: int
    split: str
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., message_count: _Optional[int] = ..., split: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ...) -> None: ...

class Message(_message.Message):
    __slots__ = ("role", "content")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    role: str
    content: str
    def __init__(self, role: _Optional[str] = ..., content: _Optional[str] = ...) -> None: ...
