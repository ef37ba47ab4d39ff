import sys

from torch import device as torch_device
from torch import load, no_grad, randint
from torch.cuda import is_available

from nets import TextCNN


def load_model(path, device):
    net = TextCNN()
    try:
        net.load_state_dict(load(path))  # BUG: load-without-map-location
    except FileNotFoundError:
        sys.exit(f"no weights at {path}: run train.py first")
    return net.to(device).eval()


def predict(net, ids, device):
    with no_grad():
        return net(ids.to(device)).argmax(dim=1).tolist()


if __name__ == "__main__":
    device = torch_device("cuda" if is_available() else "cpu")
    path = sys.argv[1] if len(sys.argv) > 1 else "textcnn.pt"
    net = load_model(path, device)
    print(predict(net, randint(0, 120, (4, 20)), device))
