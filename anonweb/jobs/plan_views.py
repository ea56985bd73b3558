from django.http import HttpResponse


def plan_page(request, *, dataset_id: int):
    return HttpResponse("The release-plan editor is being built.", status=503)
