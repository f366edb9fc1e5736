module kube-descheduler/sdk/go

go 1.26
