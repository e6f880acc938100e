from torch import nn


class _Tiny(nn.Module):
    def __init__(self, width=32, norm=nn.BatchNorm2d, num_classes=1000):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.lin = nn.Linear(8, 2048)
        self.fc = nn.Linear(2048, num_classes)

    def forward(self, x):
        x = self.pool(self.bn(self.conv(x)).relu()).flatten(1)
        return self.fc(self.lin(x))


def resnet50(num_classes=1000, **kwargs):  # simsiam builds it with num_classes=dim
    return _Tiny(num_classes=num_classes)
