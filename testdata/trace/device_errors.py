"""Device errors other than a plain mixed elementwise op: an LSTM's hidden state, index_select
with CPU indices, .numpy() of a tensor whose move back to the CPU was discarded.
Run with --keep-going: each one is found in one run."""
import torch
import torch.nn as nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(4, 8, batch_first=True)

    def forward(self, x):
        h0 = torch.zeros(1, x.size(0), 8)  # expect: TDL008
        c0 = torch.zeros(1, x.size(0), 8)  # expect: TDL008
        out, _ = self.rnn(x, (h0, c0))
        columns = torch.arange(4)  # expect: TDL008
        return out.index_select(2, columns)


device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
encoder = Encoder().to(device)
features = encoder(torch.randn(2, 3, 4).to(device))
features.cpu()  # expect: TDL003
print(features.detach().numpy().shape)  # expect: TDL009
