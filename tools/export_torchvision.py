#!/usr/bin/python3
"""PyTorch equivalents of the cnnc model zoo, and their weights as safetensors with cnnc names.

    /usr/bin/python3 tools/export_torchvision.py MODEL OUT.safetensors [--seed S] [--random-bn]

MODEL is a zoo name (models/MODEL.yml).  The weights are those of the PyTorch model built with
torch.manual_seed(S) (torchvision's own init); --random-bn also randomises the BatchNorm
gamma/beta/running statistics so BN is not the identity.  Used as a library by
tests/scripts/test_zoo_summary.py and test_torch_parity.py.

Name mapping (models/README.md): the torchvision state_dict key with '/' for '.'; BatchNorm
weight/bias become gamma/beta; num_batches_tracked is dropped.  The two Sequential models
(fmnist_cnn, cifar10_keras_cnn) map their indices to layer names through SEQ_NAMES.
safetensors is written with numpy (no safetensors package needed).
"""
import json
import struct
import sys

import numpy as np
import torch
import torch.nn as nn
import torchvision
from torchvision.models.resnet import BasicBlock, Bottleneck, ResNet

# zoo name -> per-sample input shape [C, H, W] (as in models/NAME.yml)
INPUT_SHAPES = {
    "resnet50": (3, 224, 224), "resnet18": (3, 224, 224),
    "resnext50_32x4d": (3, 224, 224), "resnext101_32x4d": (3, 224, 224),
    "efficientnet_b0": (3, 224, 224), "efficientnet_b4": (3, 380, 380), "squeezenet1_1": (3, 224, 224),
    "cifar_resnet8": (3, 32, 32), "cifar_resnet20": (3, 32, 32),
    "cifar10_keras_cnn": (3, 32, 32), "fmnist_cnn": (1, 28, 28),
}

# Sequential index -> cnnc layer name, for the models without torchvision module names.
SEQ_NAMES = {
    "fmnist_cnn": {"0": "conv1", "2": "conv2", "5": "conv3", "7": "conv4", "11": "fc1", "13": "fc2"},
    "cifar10_keras_cnn": {"0": "conv1", "2": "conv2", "6": "conv3", "8": "conv4", "13": "dense1", "16": "dense2"},
}


class CifarResNet(nn.Module):
    """He et al. CIFAR ResNet (6n+2 layers, 16/32/64 filters) with 1x1-conv projection
    shortcuts (option B), torchvision module names."""

    def __init__(self, n, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.relu = nn.ReLU(inplace=True)
        inplanes = 16
        for k, (planes, stride) in enumerate([(16, 1), (32, 2), (64, 2)]):
            blocks = []
            for i in range(n):
                s = stride if i == 0 else 1
                down = None
                if s != 1 or inplanes != planes:
                    down = nn.Sequential(nn.Conv2d(inplanes, planes, 1, s, bias=False), nn.BatchNorm2d(planes))
                blocks.append(BasicBlock(inplanes, planes, s, down))
                inplanes = planes
            setattr(self, "layer%d" % (k + 1), nn.Sequential(*blocks))
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(64, num_classes)

    def forward(self, x):
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def fmnist_cnn():
    """Exactly the model of ../shared/anchors/fmnist_torch.py."""
    return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(64 * 7 * 7, 512), nn.ReLU(), nn.Linear(512, 10))


def cifar10_keras_cnn():
    """The Keras CIFAR-10 CNN of Graphcore's IPUEstimator example, in PyTorch (NCHW)."""
    return nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 32, 3), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Dropout(0.25),
                         nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 64, 3), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Dropout(0.25),
                         nn.Flatten(), nn.Linear(64 * 6 * 6, 512), nn.ReLU(), nn.Dropout(0.5), nn.Linear(512, 10))


def build(name):
    """The PyTorch model equivalent to models/NAME.yml (eval mode)."""
    tv = torchvision.models
    ctors = {
        "resnet50": tv.resnet50, "resnet18": tv.resnet18, "resnext50_32x4d": tv.resnext50_32x4d,
        "resnext101_32x4d": lambda: ResNet(Bottleneck, [3, 4, 23, 3], groups=32, width_per_group=4),
        "efficientnet_b0": tv.efficientnet_b0, "efficientnet_b4": tv.efficientnet_b4, "squeezenet1_1": tv.squeezenet1_1,
        "cifar_resnet8": lambda: CifarResNet(1), "cifar_resnet20": lambda: CifarResNet(3),
        "cifar10_keras_cnn": cifar10_keras_cnn, "fmnist_cnn": fmnist_cnn,
    }
    if name not in ctors:
        raise KeyError("no PyTorch equivalent for zoo model '%s'" % name)
    return ctors[name]().eval()


def randomize_bn(model, gen):
    """Gives every BatchNorm non-trivial statistics and affine params (in place)."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                c = m.num_features
                m.weight.copy_(torch.rand(c, generator=gen) * 0.5 + 0.75)
                m.bias.copy_(torch.randn(c, generator=gen) * 0.1)
                m.running_mean.copy_(torch.randn(c, generator=gen) * 0.1)
                m.running_var.copy_(torch.rand(c, generator=gen) * 0.5 + 0.75)


def cnnc_name(zoo_name, torch_key):
    """cnnc parameter name for a torch state_dict key whose module is not a BatchNorm."""
    mod, _, leaf = torch_key.rpartition(".")
    if zoo_name in SEQ_NAMES:
        mod = SEQ_NAMES[zoo_name][mod]
    return mod.replace(".", "/") + "/" + leaf


def cnnc_state(model, zoo_name):
    """{cnnc name: float32 numpy array} for every parameter and running statistic."""
    out = {}
    bn_leaf = {"weight": "gamma", "bias": "beta", "running_mean": "running_mean", "running_var": "running_var"}
    for mname, m in model.named_modules():
        own = dict(m.named_parameters(recurse=False))
        own.update(dict(m.named_buffers(recurse=False)))
        for leaf, t in own.items():
            if leaf == "num_batches_tracked":
                continue
            key = (mname + "." if mname else "") + leaf
            if isinstance(m, nn.BatchNorm2d):
                name = (mname.replace(".", "/") + "/" + bn_leaf[leaf])
            else:
                name = cnnc_name(zoo_name, key)
            out[name] = t.detach().cpu().numpy().astype(np.float32)
    return out


def write_safetensors(path, tensors, metadata=None):
    """Writes {name: np.ndarray (float32)} as a safetensors file (F32, little-endian)."""
    header, offset, blobs = {}, 0, []
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name, a in tensors.items():
        b = np.ascontiguousarray(a, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        blobs.append(b)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    """{name: np.ndarray} from a safetensors file (F32/F16/BF16)."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        buf = data[b:e]
        if info["dtype"] == "F32":
            a = np.frombuffer(buf, "<f4")
        elif info["dtype"] == "F16":
            a = np.frombuffer(buf, "<f2").astype(np.float32)
        elif info["dtype"] == "BF16":
            a = (np.frombuffer(buf, "<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            raise ValueError("%s: unsupported dtype %s" % (name, info["dtype"]))
        out[name] = a.reshape(info["shape"]).copy()
    return out


def count_macs(model, shape):
    """MACs per image of conv and linear layers (forward hooks on a batch of 1)."""
    total = [0]

    def hook(m, inp, out):
        if isinstance(m, nn.Conv2d):
            total[0] += out.numel() // out.shape[0] * (m.in_channels // m.groups) * m.kernel_size[0] * m.kernel_size[1]
        elif isinstance(m, nn.Linear):
            total[0] += m.in_features * m.out_features

    hs = [m.register_forward_hook(hook) for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    with torch.no_grad():
        model(torch.zeros(1, *shape))
    for h in hs:
        h.remove()
    return total[0]


def main(argv):
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--random-bn", action="store_true")
    a = ap.parse_args(argv)
    torch.manual_seed(a.seed)
    m = build(a.model)
    if a.random_bn:
        g = torch.Generator().manual_seed(a.seed + 1)
        randomize_bn(m, g)
    st = cnnc_state(m, a.model)
    write_safetensors(a.out, st, {"format": "cnnc", "source": "torchvision %s" % torchvision.__version__})
    print("%s: %d tensors, %d values -> %s" % (a.model, len(st), sum(v.size for v in st.values()), a.out))


if __name__ == "__main__":
    main(sys.argv[1:])
