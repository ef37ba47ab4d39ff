import torch
import torch.nn as nn

SOS, EOS = 1, 2


class Encoder(nn.Module):
    def __init__(self, vocab, hidden):
        super().__init__()
        self.embedding = nn.Embedding(vocab, hidden)
        self.gru = nn.GRU(hidden, hidden, batch_first=True)

    def forward(self, src):
        return self.gru(self.embedding(src))


class Decoder(nn.Module):
    def __init__(self, vocab, hidden):
        super().__init__()
        self.embedding = nn.Embedding(vocab, hidden)
        self.gru = nn.GRU(hidden, hidden, batch_first=True)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, token, hidden):
        output, hidden = self.gru(torch.relu(self.embedding(token)), hidden)
        return self.out(output), hidden


class Translator:
    def __init__(self, encoder, decoder, device):
        self.device = device
        self.encoder = encoder.to(device).eval()
        self.decoder = decoder.to(device).eval()

    @torch.no_grad()
    def greedy_decode(self, src, max_len=10):
        src = src.to(self.device)
        _, hidden = self.encoder(src)
        decoder_input = torch.full((src.size(0), 1), SOS, dtype=torch.long)
        decoder_input.to(self.device)  # BUG: discarded-move
        result = []
        for _ in range(max_len):
            logits, hidden = self.decoder(decoder_input, hidden)
            decoder_input = logits.argmax(-1)
            result.append(decoder_input)
        return torch.cat(result, dim=1)


if __name__ == "__main__":
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    translator = Translator(Encoder(30, 16), Decoder(40, 16), device)
    print(translator.greedy_decode(torch.randint(3, 30, (2, 7))).tolist())
