"""Experiment configuration: TOML file -> validated, typed `Config`.

Every field is checked before any work starts. A bad value raises `ConfigError`, whose message is
one line naming the field and what is allowed; the CLI prints it and exits with status 2.
"""

from p2pfl.config.algorithm import declared_options
from p2pfl.config.load import (
    check_fields,
    config_from_dict,
    config_with_overrides,
    folder_name,
    load_config,
    parse_overrides,
    read_toml,
    validate,
    variant_label,
    variant_overrides,
    with_overrides,
)
from p2pfl.config.sections import (
    _RANGES,
    DEVICES,
    DTYPES,
    EXECUTORS,
    OBJECT,
    ON_DIVERGENCE,
    ByzantineConfig,
    Config,
    ConfigError,
    DataConfig,
    EngineConfig,
    EvalConfig,
    ModelConfig,
    NetworkConfig,
    PrivacyConfig,
    TopologyConfig,
    _choices,
    algorithm_options,
)

__all__ = ["DEVICES", "DTYPES", "EXECUTORS", "OBJECT", "ON_DIVERGENCE", "ByzantineConfig",
           "Config", "ConfigError", "DataConfig", "EngineConfig", "EvalConfig", "ModelConfig",
           "NetworkConfig", "PrivacyConfig", "TopologyConfig",
           "_RANGES", "_choices", "algorithm_options", "check_fields", "config_from_dict",
           "config_with_overrides", "declared_options", "folder_name", "load_config",
           "parse_overrides", "read_toml", "validate", "variant_label", "variant_overrides",
           "with_overrides"]
