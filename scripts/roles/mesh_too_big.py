"""A device mesh for 8 ranks in a job of one."""

import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

mesh = init_device_mesh("cuda", (2, 4), mesh_dim_names=("dp", "tp"))
print(mesh)
dist.destroy_process_group()
