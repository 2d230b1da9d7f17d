package transport

type ecCodec struct{}

type ecSender struct{}

func newECCodec(cfg *Config) *ecCodec { return &ecCodec{} }
