"""An embedding looked up with an index past its table, then a cuDNN convolution: the index
kernel's assertion fires asynchronously and the error surfaces at a later call."""

import torch

emb = torch.nn.Embedding(100, 16).cuda()
conv = torch.nn.Conv2d(1, 4, 3).cuda()
ids = torch.tensor([[3, 7, 250]], device="cuda")  # 250 >= num_embeddings
x = emb(ids)  # the kernel's assert fires here, asynchronously
img = x.reshape(1, 1, 3, 16).float()
y = conv(img)  # cuDNN
print(y.sum().item())
