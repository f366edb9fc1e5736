module kube-descheduler/examples/wasm-plugins/go

go 1.26

toolchain go1.26.8

require kube-descheduler/sdk/go v0.0.0

replace kube-descheduler/sdk/go => ../../../sdk/go
