"""paddle.distributed.auto_parallel: meshes, placements, shard_tensor/reshard, DistTensor helpers."""
from . import placement_type
from .api import (ProcessMesh, ShardDataloader, replicate_dense_parameters, replicate_in_place, reshard,
                  shard_dataloader, shard_tensor)
from .dist_tensor import DistAttr, dtensor_from_local, shard_layer, unshard_dtensor
from .placement_type import Partial, Placement, Replicate, Shard, to_dim_map, to_placements
from .sharding_stages import ShardingStage1, ShardingStage2, ShardingStage3, shard_optimizer

__all__ = ["ProcessMesh", "Placement", "Shard", "Replicate", "Partial", "shard_tensor", "reshard", "shard_dataloader",
           "ShardDataloader", "DistAttr", "dtensor_from_local", "unshard_dtensor", "shard_layer", "placement_type",
           "to_placements", "to_dim_map", "replicate_in_place", "replicate_dense_parameters", "shard_optimizer",
           "ShardingStage1", "ShardingStage2", "ShardingStage3"]
