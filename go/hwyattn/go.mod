module hwyattn.dev/hwyattn

go 1.19
