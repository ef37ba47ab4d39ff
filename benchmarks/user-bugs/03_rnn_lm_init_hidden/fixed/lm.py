"""Tiny word-level language model (GRU), trained on random token streams."""
import argparse
import math

import torch
import torch.nn as nn


class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp=32, nhid=64, nlayers=2, dropout=0.1):
        super().__init__()
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.GRU(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        self.nhid, self.nlayers = nhid, nlayers

    def forward(self, input, hidden):
        output, hidden = self.rnn(self.encoder(input), hidden)
        return self.decoder(output), hidden

    def init_hidden(self, bsz):
        return torch.zeros(self.nlayers, bsz, self.nhid, device=self.decoder.weight.device)


def batchify(data, bsz, device):
    nbatch = data.size(0) // bsz
    return data[:nbatch * bsz].view(bsz, -1).t().contiguous().to(device)


def main():
    parser = argparse.ArgumentParser(description="GRU language model")
    parser.add_argument("--bptt", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--cpu", action="store_true", help="train on the CPU even if CUDA is there")
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() and not args.cpu else "cpu")

    ntokens = 50
    train_data = batchify(torch.randint(0, ntokens, (400,)), args.batch_size, device)
    model = RNNModel(ntokens).to(device)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)

    for epoch in range(args.epochs):
        model.train()
        hidden = model.init_hidden(args.batch_size)
        total = 0.0
        for i in range(0, train_data.size(0) - 1, args.bptt):
            seq_len = min(args.bptt, len(train_data) - 1 - i)
            data, targets = train_data[i:i + seq_len], train_data[i + 1:i + 1 + seq_len].reshape(-1)
            hidden = hidden.detach()
            output, hidden = model(data, hidden)
            loss = criterion(output.view(-1, ntokens), targets)
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 0.25)
            optimizer.step()
            total += loss.item()
        print(f"epoch {epoch}: ppl {math.exp(total / (train_data.size(0) // args.bptt)):.1f}")


if __name__ == "__main__":
    main()
